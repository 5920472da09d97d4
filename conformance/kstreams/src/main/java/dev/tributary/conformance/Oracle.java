package dev.tributary.conformance;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Runs event histories through Kafka Streams' windowed aggregation, one
 * TopologyTestDriver (no broker) per history, and reports every window
 * update it emits.
 *
 * <p>Input, on stdin: one history per line, as JSON: the window kind
 * ("tumbling", "hopping", "sliding" or "session") and its Kafka parameters
 * in milliseconds (sizeMs and advanceMs, differenceMs, gapMs; graceMs), and
 * the records in the order they arrive (key, event time t in Unix ms,
 * integer value v). Output, on stdout: one line per history, as JSON: every
 * update of the windowed table in the order Kafka emits it (i: the index of
 * the record that caused it; key; start and end as Kafka's Window reports
 * them; count, sum, min and max, or deleted for a session merged away), and
 * the indexes of the records that raised the dropped-records metric.
 *
 * <p>Caching is off, so every update is emitted; the stores are in memory; the
 * window stores keep a day, so nothing but the grace period decides what Kafka
 * drops, and the session store keeps Kafka's default retention (see
 * sessionStore). The
 * mapping between Kafka's parameters and the pipeline's is the caller's
 * (conformance/kstreams_test.go): this program only runs Kafka.
 */
public final class Oracle {
    private Oracle() {}

    /** One input record. */
    public record Rec(String key, long t, long v) {}

    /** One history: the window and the records, in arrival order. */
    public record History(String id, String kind, long sizeMs, long advanceMs, long differenceMs, long gapMs,
                          long graceMs, List<Rec> records) {}

    /** One update of a window, or its deletion (a session merged into another). */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Update(int i, String key, long start, long end, Boolean deleted,
                         Long count, Long sum, Long min, Long max) {}

    /** What Kafka did with one history. */
    @JsonInclude(JsonInclude.Include.NON_NULL)
    public record Result(String id, List<Update> updates, List<Integer> dropped, String error) {}

    /** A window's aggregate: count, sum, min and max of integer values. */
    public record Agg(long count, long sum, long min, long max) {
        static final Agg EMPTY = new Agg(0, 0, Long.MAX_VALUE, Long.MIN_VALUE);

        Agg add(long v) {
            return new Agg(count + 1, sum + v, Math.min(min, v), Math.max(max, v));
        }

        Agg merge(Agg o) {
            return new Agg(count + o.count, sum + o.sum, Math.min(min, o.min), Math.max(max, o.max));
        }
    }

    /** Agg as four big-endian longs. */
    static final Serde<Agg> AGG_SERDE = Serdes.serdeFrom(
        (Serializer<Agg>) (topic, a) -> a == null ? null
            : ByteBuffer.allocate(32).putLong(a.count).putLong(a.sum).putLong(a.min).putLong(a.max).array(),
        (Deserializer<Agg>) (topic, b) -> {
            if (b == null) {
                return null;
            }
            final ByteBuffer buf = ByteBuffer.wrap(b);
            return new Agg(buf.getLong(), buf.getLong(), buf.getLong(), buf.getLong());
        });

    public static void main(final String[] args) throws Exception {
        Drivers.serve(History.class, Oracle::run, (h, e) -> new Result(h == null ? null : h.id(), null, null, e.toString()));
    }

    /** Pipes h's records, one at a time, through the aggregation of h's window kind. */
    static Result run(final History h) {
        final StreamsBuilder builder = new StreamsBuilder();
        final KGroupedStream<String, Long> grouped = builder
            .stream("in", Consumed.with(Serdes.String(), Serdes.Long()))
            .groupByKey();
        final Duration grace = Duration.ofMillis(h.graceMs());
        final KTable<Windowed<String>, Agg> table = switch (h.kind()) {
            case "tumbling" -> grouped
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(h.sizeMs()), grace))
                .aggregate(() -> Agg.EMPTY, (k, v, a) -> a.add(v), windowStore());
            case "hopping" -> grouped
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(h.sizeMs()), grace)
                    .advanceBy(Duration.ofMillis(h.advanceMs())))
                .aggregate(() -> Agg.EMPTY, (k, v, a) -> a.add(v), windowStore());
            case "sliding" -> grouped
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(h.differenceMs()), grace))
                .aggregate(() -> Agg.EMPTY, (k, v, a) -> a.add(v), windowStore());
            case "session" -> grouped
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(h.gapMs()), grace))
                .aggregate(() -> Agg.EMPTY, (k, v, a) -> a.add(v), (k, a, b) -> a.merge(b), sessionStore());
            default -> throw new IllegalArgumentException("unknown window kind " + h.kind());
        };
        // Each update as "start end count sum min max", a deletion as "start end".
        table.toStream()
            .map((wk, a) -> KeyValue.pair(wk.key(), wk.window().start() + " " + wk.window().end()
                + (a == null ? "" : " " + a.count + " " + a.sum + " " + a.min + " " + a.max)))
            .to("out", Produced.with(Serdes.String(), Serdes.String()));

        final Properties props = Drivers.props("conformance");

        final List<Update> updates = new ArrayList<>();
        final List<Integer> dropped = new ArrayList<>();
        try (TopologyTestDriver driver = new TopologyTestDriver(builder.build(), props, Instant.EPOCH)) {
            final TestInputTopic<String, Long> input =
                driver.createInputTopic("in", new StringSerializer(), new LongSerializer());
            final TestOutputTopic<String, String> output =
                driver.createOutputTopic("out", new StringDeserializer(), new StringDeserializer());
            double droppedBefore = 0;
            for (int i = 0; i < h.records().size(); i++) {
                final Rec rec = h.records().get(i);
                input.pipeInput(rec.key(), rec.v(), Instant.ofEpochMilli(rec.t()));
                for (final KeyValue<String, String> kv : output.readKeyValuesToList()) {
                    updates.add(parse(i, kv.key, kv.value));
                }
                final double droppedNow = Drivers.droppedRecords(driver);
                if (droppedNow > droppedBefore) {
                    dropped.add(i);
                }
                droppedBefore = droppedNow;
            }
        }
        return new Result(h.id(), updates, dropped, null);
    }

    /** A window store that keeps a day: longer than any history, so only the grace period drops. */
    private static Materialized<String, Agg, WindowStore<Bytes, byte[]>> windowStore() {
        return Materialized.<String, Agg, WindowStore<Bytes, byte[]>>with(Serdes.String(), AGG_SERDE)
            .withRetention(Duration.ofDays(1));
    }

    /**
     * A session store with Kafka's default retention (gap + grace), as a plain SessionWindows topology has it: a
     * closed session is gone from the store, so a late record cannot merge into it. With a longer retention Kafka
     * finds closed sessions and merges a late bridging record into them, retracting a final session even when the
     * record is dropped as late for every window it would be alone in; this project never changes a final window
     * that its late policy does not accept a record for.
     */
    private static Materialized<String, Agg, SessionStore<Bytes, byte[]>> sessionStore() {
        return Materialized.<String, Agg, SessionStore<Bytes, byte[]>>with(Serdes.String(), AGG_SERDE);
    }

    private static Update parse(final int i, final String key, final String line) {
        final String[] f = line.split(" ");
        final long start = Long.parseLong(f[0]);
        final long end = Long.parseLong(f[1]);
        if (f.length == 2) {
            return new Update(i, key, start, end, true, null, null, null, null);
        }
        return new Update(i, key, start, end, null,
            Long.parseLong(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]), Long.parseLong(f[5]));
    }

}
