package dev.tributary.conformance;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;

/** What the oracles share: their exchange with the Go test, and how they run Kafka Streams. */
final class Drivers {
    private Drivers() {}

    /**
     * Reads one history of type {@code type} per line of stdin, runs it, and writes its result as
     * one line of stdout; a history that cannot be read or run is answered by {@code failed} (the
     * history, null if unread, and the exception), so the test names it rather than hanging.
     */
    static <H, R> void serve(final Class<H> type, final Function<H, R> run, final BiFunction<H, Exception, R> failed)
            throws IOException {
        final ObjectMapper json = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);
        final BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        final BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) {
                continue;
            }
            H h = null;
            R r;
            try {
                h = json.readValue(line, type);
                r = run.apply(h);
            } catch (final Exception e) {
                r = failed.apply(h, e);
            }
            out.write(json.writeValueAsString(r));
            out.newLine();
            out.flush();
        }
    }

    /**
     * The test driver's settings: no broker (the driver never connects), caching off so every
     * update is emitted, in-memory stores.
     */
    static Properties props(final String applicationId) {
        final Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:9");
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        props.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG, BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
        return props;
    }

    /** The task's dropped-records-total metric (records Kafka skipped as late). */
    static double droppedRecords(final TopologyTestDriver driver) {
        double total = 0;
        for (final Map.Entry<MetricName, ? extends Metric> e : driver.metrics().entrySet()) {
            if (e.getKey().name().equals("dropped-records-total")) {
                total += ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return total;
    }
}
