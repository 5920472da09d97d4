package dev.tributary.conformance;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.flink.api.common.serialization.SerializerConfigImpl;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.nfa.compiler.NFACompiler;
import org.apache.flink.cep.operator.CepOperator;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.util.KeyedOneInputStreamOperatorTestHarness;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

/**
 * Runs event histories through Flink CEP, one keyed CepOperator per rule in
 * Flink's operator test harness (no cluster), and reports the matches it
 * makes.
 *
 * <p>Input, on stdin: one history per line, as JSON: id; outOfOrdernessMs;
 * rules, in the project's JSON rule format (pkg/cep), the subset with a Flink
 * equivalent: begin, next, followedBy, notFollowedBy (last), type, where,
 * timesOrMore, within, afterMatch (skipPastLastEvent, the project's default,
 * or noSkip); and events, in the order the shard holds them (each event once):
 * id, type, key, t (event time, Unix ms) and data. Output, on stdout: one line
 * per history, as JSON: matches, each its rule, key and the matched events'
 * ids in the order of the pattern's steps, per rule in the order Flink emits
 * them; late, the ids of events the operators dropped as late that a rule
 * reads (see below); or error.
 *
 * <p>Each rule's operator gets the events of the rule's types (the events the
 * project reads for it: see conformance/flinkcep_test.go for why), in arrival
 * order, each with its event time as the record's timestamp, and after every
 * event of the history the shard's watermark as pkg/cep makes it, the newest
 * event time seen minus outOfOrderness, in Flink's terms: a Flink watermark W
 * says no event at or before W follows, pkg/cep's watermark w that none before
 * w follows, so W = w - 1 (Flink's own BoundedOutOfOrdernessWatermarks emit
 * newest - outOfOrderness - 1). After the last event a final watermark
 * Long.MAX_VALUE ends the input, as a bounded source does. The mapping between
 * the two engines is the caller's; this program only runs Flink.
 */
public final class CepOracle {
    private CepOracle() {}

    /** One match: the rule, the key and the matched events' ids. */
    public record Match(String rule, String key, List<String> events) {}

    /** What Flink CEP made of one history. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Result(String id, List<Match> matches, List<String> late, String error) {}

    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode h = json.readTree(line);
            String id = h.path("id").asText();
            Result r;
            try {
                r = run(id, h);
            } catch (Exception | Error e) {
                StringWriter sw = new StringWriter();
                e.printStackTrace(new PrintWriter(sw));
                r = new Result(id, null, null, sw.toString());
            }
            out.write(json.writeValueAsString(r));
            out.newLine();
            out.flush();
        }
    }

    /** One step of a rule. */
    record Step(String name, String contiguity, String type, Where.Expr where, int timesOrMore) {}

    /** A rule of the supported subset. */
    record Rule(String id, List<Step> steps, long withinMs, boolean noSkip) {
        boolean strict() {
            return steps.stream().anyMatch(s -> s.contiguity().equals("next"));
        }

        /** Whether an event of this type is one of the rule's: a step reads it. */
        boolean reads(String type) {
            return steps.stream().anyMatch(s -> s.type() == null || s.type().equals(type));
        }

        int mask(Where.Ev0 ev) {
            int m = 0;
            for (int i = 0; i < steps.size(); i++) {
                Step s = steps.get(i);
                if ((s.type() == null || s.type().equals(ev.type())) && (s.where() == null || s.where().eval(ev))) {
                    m |= 1 << i;
                }
            }
            return m;
        }
    }

    static Rule rule(JsonNode r) {
        Set<String> known = Set.of("id", "description", "pattern", "within", "afterMatch");
        r.fieldNames().forEachRemaining(f -> {
            if (!known.contains(f)) {
                throw new IllegalArgumentException("rule " + r.path("id").asText() + ": " + f + " has no Flink CEP equivalent here");
            }
        });
        List<Step> steps = new ArrayList<>();
        for (JsonNode s : r.path("pattern")) {
            String name = null, contiguity = null;
            for (String c : new String[] {"begin", "next", "followedBy", "notFollowedBy"}) {
                if (s.has(c)) {
                    name = s.get(c).asText();
                    contiguity = c;
                }
            }
            Set<String> stepKnown = Set.of("begin", "next", "followedBy", "notFollowedBy", "type", "where", "timesOrMore");
            s.fieldNames().forEachRemaining(f -> {
                if (!stepKnown.contains(f)) {
                    throw new IllegalArgumentException("rule " + r.path("id").asText() + ": step field " + f + " has no Flink CEP equivalent here");
                }
            });
            String type = s.hasNonNull("type") && !s.get("type").asText().isEmpty() ? s.get("type").asText() : null;
            Where.Expr where = s.hasNonNull("where") && !s.get("where").asText().isEmpty() ? Where.parse(s.get("where").asText()) : null;
            steps.add(new Step(name, contiguity, type, where, s.path("timesOrMore").asInt(0)));
        }
        long within = r.hasNonNull("within") ? withinMs(r.get("within").asText()) : 0;
        String after = r.path("afterMatch").asText("");
        if (!after.isEmpty() && !after.equals("noSkip") && !after.equals("skipPastLastEvent")) {
            throw new IllegalArgumentException("afterMatch " + after);
        }
        return new Rule(r.path("id").asText(), steps, within, after.equals("noSkip"));
    }

    /** A duration as Go writes it ("90s", "1m30s", "250ms", "1h"), in milliseconds. */
    static long withinMs(String d) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+(?:\\.\\d+)?)(h|ms|m|s)").matcher(d);
        double ms = 0;
        int end = 0;
        while (m.find() && m.start() == end) {
            double v = Double.parseDouble(m.group(1));
            ms += v * switch (m.group(2)) {
                case "h" -> 3_600_000;
                case "m" -> 60_000;
                case "s" -> 1_000;
                default -> 1;
            };
            end = m.end();
        }
        if (end != d.length() || end == 0) {
            throw new IllegalArgumentException("within " + d + ": not a duration the oracle reads");
        }
        return Math.round(ms);
    }

    /** The rule's pattern in Flink's API: the same steps, contiguities, quantifier, time and skip strategy. */
    static Pattern<Ev, Ev> pattern(Rule r) {
        AfterMatchSkipStrategy skip = r.noSkip() ? AfterMatchSkipStrategy.noSkip() : AfterMatchSkipStrategy.skipPastLastEvent();
        Pattern<Ev, Ev> p = null;
        for (int i = 0; i < r.steps().size(); i++) {
            Step s = r.steps().get(i);
            Bit cond = new Bit(i);
            switch (s.contiguity()) {
                case "begin" -> {
                    p = Pattern.<Ev>begin(s.name(), skip).where(cond);
                    if (s.timesOrMore() > 0) {
                        p = p.timesOrMore(s.timesOrMore());
                    }
                }
                case "next" -> p = p.next(s.name()).where(cond);
                case "followedBy" -> p = p.followedBy(s.name()).where(cond);
                case "notFollowedBy" -> p = p.notFollowedBy(s.name()).where(cond);
                default -> throw new IllegalArgumentException("step " + i + " names no contiguity");
            }
        }
        if (r.withinMs() > 0) {
            p = p.within(Duration.ofMillis(r.withinMs()));
        }
        return p;
    }

    /** A step's condition: the event matches the step's type and where clause. */
    static final class Bit extends SimpleCondition<Ev> {
        private final int bit;

        Bit(int bit) {
            this.bit = bit;
        }

        @Override
        public boolean filter(Ev e) {
            return (e.mask & (1 << bit)) != 0;
        }
    }

    /** Emits a match as its key and ids, tab-separated, the ids in step order. */
    static final class Emit extends PatternProcessFunction<Ev, String> {
        private final ArrayList<String> names;

        Emit(List<String> names) {
            this.names = new ArrayList<>(names);
        }

        @Override
        public void processMatch(Map<String, List<Ev>> match, Context ctx, Collector<String> out) {
            String key = null;
            List<String> ids = new ArrayList<>();
            for (String n : names) {
                for (Ev e : match.getOrDefault(n, List.of())) {
                    key = e.key;
                    ids.add(e.id);
                }
            }
            out.collect(key + "\t" + String.join(",", ids));
        }
    }

    static Result run(String id, JsonNode h) throws Exception {
        long ooo = h.path("outOfOrdernessMs").asLong();
        List<Rule> rules = new ArrayList<>();
        for (JsonNode r : h.path("rules")) {
            rules.add(rule(r));
        }
        List<Where.Ev0> events = new ArrayList<>();
        List<Long> times = new ArrayList<>();
        for (JsonNode e : h.path("events")) {
            events.add(new Where.Ev0(e.path("id").asText(), e.path("type").asText(), e.path("key").asText(), e.path("data")));
            times.add(e.path("t").asLong());
        }
        TypeSerializer<Ev> ser = TypeInformation.of(Ev.class).createSerializer(new SerializerConfigImpl());
        OutputTag<Ev> lateTag = new OutputTag<>("late", TypeInformation.of(Ev.class));
        List<Match> matches = new ArrayList<>();
        Set<String> late = new TreeSet<>();
        for (Rule r : rules) {
            List<String> names = new ArrayList<>();
            for (Step s : r.steps()) {
                if (!s.contiguity().equals("notFollowedBy")) {
                    names.add(s.name());
                }
            }
            CepOperator<Ev, String, String> op = new CepOperator<>(ser, false,
                    NFACompiler.compileFactory(pattern(r), false), null,
                    r.noSkip() ? AfterMatchSkipStrategy.noSkip() : AfterMatchSkipStrategy.skipPastLastEvent(),
                    new Emit(names), lateTag);
            KeySelector<Ev, String> byKey = e -> e.key;
            Set<String> reads = new LinkedHashSet<>();
            try (KeyedOneInputStreamOperatorTestHarness<String, Ev, String> harness =
                    new KeyedOneInputStreamOperatorTestHarness<>(op, byKey, Types.STRING)) {
                harness.open();
                long newest = Long.MIN_VALUE, wm = Long.MIN_VALUE;
                for (int i = 0; i < events.size(); i++) {
                    Where.Ev0 e = events.get(i);
                    long t = times.get(i);
                    if (r.reads(e.type())) {
                        int mask = r.mask(e);
                        // The events the project reads for the rule: those a step
                        // matches, and for a rule with strict contiguity every
                        // event of its types (pkg/cep ruleset.go, hit).
                        if (mask != 0 || r.strict()) {
                            reads.add(e.id());
                        }
                        harness.processElement(new StreamRecord<>(new Ev(e.id(), e.key(), t, mask), t));
                    }
                    newest = Math.max(newest, t);
                    long w = newest - ooo - 1;
                    if (w > wm) {
                        wm = w;
                        harness.processWatermark(new Watermark(w));
                    }
                }
                harness.processWatermark(new Watermark(Long.MAX_VALUE));
                for (String m : harness.extractOutputValues()) {
                    String[] kv = m.split("\t", 2);
                    matches.add(new Match(r.id(), kv[0], List.of(kv[1].split(","))));
                }
                var dropped = harness.getSideOutput(lateTag);
                if (dropped != null) {
                    for (StreamRecord<Ev> d : dropped) {
                        if (reads.contains(d.getValue().id)) {
                            late.add(d.getValue().id);
                        }
                    }
                }
            }
        }
        return new Result(id, matches, new ArrayList<>(late), null);
    }
}
