package dev.tributary.conformance;

/**
 * An event as one rule's CEP operator sees it (a Flink POJO): its id, key and
 * event time, and mask, the steps of the rule whose type and where clause it
 * matches (bit i: step i), worked out when the event is read.
 */
public class Ev {
    public String id;
    public String key;
    public long t;
    public int mask;

    public Ev() {}

    Ev(String id, String key, long t, int mask) {
        this.id = id;
        this.key = key;
        this.t = t;
        this.mask = mask;
    }
}
