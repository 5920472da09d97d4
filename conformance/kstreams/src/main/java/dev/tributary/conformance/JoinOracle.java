package dev.tributary.conformance;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;

/**
 * Runs histories of two streams through Kafka Streams' KStream–KStream join, one TopologyTestDriver (no broker)
 * per history, and reports every record the join emits: the conformance oracle of package join
 * (conformance/join_test.go). It lives in the Kafka Streams oracle's jar; run it with
 * {@code java -cp kstreams-oracle.jar dev.tributary.conformance.JoinOracle}.
 *
 * <p>Input, on stdin: one history per line, as JSON: the join type ("inner", "left" or "outer"), the window in
 * milliseconds (withinMs: how long after a left record a right record joins it, JoinWindows' after; beforeMs: how
 * long before, JoinWindows' before; graceMs) and the records in the order they arrive (id, side "left" or
 * "right", key, event time t in Unix ms). Output, on stdout: one line per history, as JSON: every joined pair (the
 * two records' ids), every left and right record emitted unmatched, each with the index of the record whose
 * processing emitted it (the end of input: the number of records), and the indexes of the records that raised the
 * dropped-records metric (a join store refusing a record its retention has passed).
 *
 * <p>Stores are in memory; caching does not apply to a KStream. Kafka emits the unmatched records of a left or
 * outer join only when a record advances stream time, at most once per emit interval of wall-clock time: the
 * interval is 0 here, as the driver's wall clock never moves. After the last record, a record of a key no history
 * uses, far enough ahead to close every window, makes Kafka emit what it still holds.
 */
public final class JoinOracle {
    private JoinOracle() {}

    /** One input record: its value is its id. */
    public record Rec(String id, String side, String key, long t) {}

    /** One history: the join and the records, in arrival order. */
    public record History(String id, String joinType, long withinMs, long beforeMs, long graceMs, List<Rec> records) {}

    /** One output: a joined pair, or a record unmatched (the other id null), emitted while processing record i. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Out(int i, String left, String right) {}

    /** What Kafka did with one history. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Result(String id, List<Out> outputs, List<Integer> dropped, String error) {}

    /** The key of the record that flushes the join at the end: no history's. */
    static final String FLUSH_KEY = "\u0000flush";

    public static void main(final String[] args) throws Exception {
        Drivers.serve(History.class, JoinOracle::run, (h, e) -> new Result(h == null ? null : h.id(), null, null, e.toString()));
    }

    /** Pipes h's records, one at a time, through the join of h's type. */
    static Result run(final History h) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KStream<String, String> left = builder.stream("left", Consumed.with(Serdes.String(), Serdes.String()));
        final KStream<String, String> right = builder.stream("right", Consumed.with(Serdes.String(), Serdes.String()));
        // A right record joins a left one when its time is in [left - before, left + within].
        final JoinWindows windows = JoinWindows
            .ofTimeDifferenceAndGrace(Duration.ofMillis(h.withinMs()), Duration.ofMillis(h.graceMs()))
            .before(Duration.ofMillis(h.beforeMs()));
        final ValueJoiner<String, String, String> joiner = (l, r) -> (l == null ? "" : l) + "|" + (r == null ? "" : r);
        final StreamJoined<String, String, String> joined = StreamJoined.with(Serdes.String(), Serdes.String(), Serdes.String());
        final KStream<String, String> result = switch (h.joinType()) {
            case "inner" -> left.join(right, joiner, windows, joined);
            case "left" -> left.leftJoin(right, joiner, windows, joined);
            case "outer" -> left.outerJoin(right, joiner, windows, joined);
            default -> throw new IllegalArgumentException("unknown join type " + h.joinType());
        };
        result.to("out", Produced.with(Serdes.String(), Serdes.String()));

        final Properties props = Drivers.props("join-conformance");
        props.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX, 0L);

        final List<Out> outputs = new ArrayList<>();
        final List<Integer> dropped = new ArrayList<>();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.EPOCH)) {
            final TestInputTopic<String, String> leftIn =
                driver.createInputTopic("left", new StringSerializer(), new StringSerializer());
            final TestInputTopic<String, String> rightIn =
                driver.createInputTopic("right", new StringSerializer(), new StringSerializer());
            final TestOutputTopic<String, String> output =
                driver.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            double droppedBefore = 0;
            long newest = Long.MIN_VALUE;
            final int n = h.records().size();
            for (int i = 0; i <= n; i++) {
                if (i < n) {
                    final Rec rec = h.records().get(i);
                    final TestInputTopic<String, String> topic = switch (rec.side()) {
                        case "left" -> leftIn;
                        case "right" -> rightIn;
                        default -> throw new IllegalArgumentException("record " + i + ": unknown side " + rec.side());
                    };
                    topic.pipeInput(rec.key(), rec.id(), Instant.ofEpochMilli(rec.t()));
                    newest = Math.max(newest, rec.t());
                } else if (n > 0) {
                    // The end: stream time past every window and its grace.
                    final long end = newest + h.withinMs() + h.beforeMs() + h.graceMs() + 1;
                    leftIn.pipeInput(FLUSH_KEY, "flush", Instant.ofEpochMilli(end));
                }
                for (final KeyValue<String, String> kv : output.readKeyValuesToList()) {
                    if (FLUSH_KEY.equals(kv.key)) {
                        continue;
                    }
                    final int bar = kv.value.indexOf('|');
                    final String l = kv.value.substring(0, bar);
                    final String r = kv.value.substring(bar + 1);
                    outputs.add(new Out(i, l.isEmpty() ? null : l, r.isEmpty() ? null : r));
                }
                final double droppedNow = Drivers.droppedRecords(driver);
                if (droppedNow > droppedBefore && i < n) {
                    dropped.add(i);
                }
                droppedBefore = droppedNow;
            }
        }
        return new Result(h.id(), outputs, dropped, null);
    }

}
