package dev.tributary.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * A rule's where clause (pkg/cep/expr.go), parsed and evaluated on an event:
 * comparisons of key, type, id or data.&lt;field&gt; with ==, !=, &gt;, &gt;=, &lt;,
 * &lt;=, in (...), not in (...), exists(...), joined by &amp;&amp;/and, ||/or, not and
 * parentheses. A comparison whose field is missing, or whose types differ, is
 * false; != is true only for a value of the literal's type. Flink CEP's
 * conditions are Java code: this is the condition a Flink user would write
 * for the clause.
 */
final class Where {
    /** A typed value: 'n' number, 's' string, 'b' bool, 'z' null, 'o' object or array, 0 missing. */
    record Value(char kind, double num, String str, boolean b) {
        static final Value MISSING = new Value((char) 0, 0, null, false);
    }

    interface Expr {
        boolean eval(Ev0 ev);
    }

    /** What a clause reads of an event. */
    record Ev0(String id, String type, String key, JsonNode data) {}

    private final String src;
    private int pos;

    private Where(String src) {
        this.src = src;
    }

    static Expr parse(String src) {
        Where p = new Where(src);
        Expr e = p.or();
        p.skip();
        if (p.pos != src.length()) {
            throw p.error("unexpected text");
        }
        return e;
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("where " + src + ": at column " + (pos + 1) + ": " + what);
    }

    private void skip() {
        while (pos < src.length() && Character.isWhitespace(src.charAt(pos))) {
            pos++;
        }
    }

    /** Consumes sym (an operator) if it comes next. */
    private boolean sym(String sym) {
        skip();
        if (src.startsWith(sym, pos)) {
            pos += sym.length();
            return true;
        }
        return false;
    }

    /** Consumes the word w if it comes next, as a whole word. */
    private boolean word(String w) {
        skip();
        int end = pos + w.length();
        if (src.startsWith(w, pos) && (end == src.length() || !isIdent(src.charAt(end)))) {
            pos = end;
            return true;
        }
        return false;
    }

    private static boolean isIdent(char c) {
        return Character.isLetterOrDigit(c) || c == '_' || c == '.';
    }

    private Expr or() {
        Expr l = and();
        while (sym("||") || word("or")) {
            Expr a = l, b = and();
            l = ev -> a.eval(ev) || b.eval(ev);
        }
        return l;
    }

    private Expr and() {
        Expr l = unary();
        while (sym("&&") || word("and")) {
            Expr a = l, b = unary();
            l = ev -> a.eval(ev) && b.eval(ev);
        }
        return l;
    }

    private Expr unary() {
        if (word("not")) {
            Expr e = unary();
            return ev -> !e.eval(ev);
        }
        if (sym("(")) {
            Expr e = or();
            if (!sym(")")) {
                throw error("expected )");
            }
            return e;
        }
        if (word("exists")) {
            if (!sym("(")) {
                throw error("expected (");
            }
            String path = path();
            if (!sym(")")) {
                throw error("expected )");
            }
            return ev -> read(ev, path).kind() != 0;
        }
        String path = path();
        if (word("not")) {
            if (!word("in")) {
                throw error("expected in");
            }
            List<Value> lits = list();
            return ev -> {
                Value v = read(ev, path);
                if (v.kind() == 0) {
                    return false;
                }
                for (Value l : lits) {
                    if (equal(v, l)) {
                        return false;
                    }
                }
                return true;
            };
        }
        if (word("in")) {
            List<Value> lits = list();
            return ev -> {
                Value v = read(ev, path);
                for (Value l : lits) {
                    if (v.kind() != 0 && equal(v, l)) {
                        return true;
                    }
                }
                return false;
            };
        }
        for (String op : new String[] {"==", "!=", ">=", "<=", ">", "<"}) {
            if (sym(op)) {
                Value lit = literal();
                return ev -> compare(read(ev, path), op, lit);
            }
        }
        throw error("expected an operator");
    }

    private List<Value> list() {
        if (!sym("(")) {
            throw error("expected (");
        }
        List<Value> out = new ArrayList<>();
        do {
            out.add(literal());
        } while (sym(","));
        if (!sym(")")) {
            throw error("expected )");
        }
        return out;
    }

    private String path() {
        skip();
        int start = pos;
        while (pos < src.length() && isIdent(src.charAt(pos))) {
            pos++;
        }
        if (start == pos) {
            throw error("expected a field");
        }
        return src.substring(start, pos);
    }

    private Value literal() {
        skip();
        if (pos >= src.length()) {
            throw error("expected a value");
        }
        char c = src.charAt(pos);
        if (c == '\'' || c == '"') {
            StringBuilder b = new StringBuilder();
            pos++;
            while (pos < src.length() && src.charAt(pos) != c) {
                if (src.charAt(pos) == '\\' && pos + 1 < src.length()) {
                    pos++;
                }
                b.append(src.charAt(pos++));
            }
            if (pos >= src.length()) {
                throw error("unterminated string");
            }
            pos++;
            return new Value('s', 0, b.toString(), false);
        }
        if (word("true")) {
            return new Value('b', 0, null, true);
        }
        if (word("false")) {
            return new Value('b', 0, null, false);
        }
        if (word("null")) {
            return new Value('z', 0, null, false);
        }
        int start = pos;
        while (pos < src.length() && "+-0123456789.eE".indexOf(src.charAt(pos)) >= 0) {
            pos++;
        }
        try {
            return new Value('n', Double.parseDouble(src.substring(start, pos)), null, false);
        } catch (NumberFormatException e) {
            pos = start;
            throw error("expected a value");
        }
    }

    static Value read(Ev0 ev, String path) {
        switch (path) {
            case "key":
                return new Value('s', 0, ev.key(), false);
            case "type":
                return new Value('s', 0, ev.type(), false);
            case "id":
                return new Value('s', 0, ev.id(), false);
            default:
        }
        if (!path.startsWith("data.")) {
            return Value.MISSING;
        }
        JsonNode n = ev.data();
        for (String part : path.substring(5).split("\\.", -1)) {
            if (n == null || !n.isObject()) {
                return Value.MISSING;
            }
            n = n.get(part);
        }
        if (n == null || n.isMissingNode()) {
            return Value.MISSING;
        }
        if (n.isNumber()) {
            return new Value('n', n.doubleValue(), null, false);
        }
        if (n.isTextual()) {
            return new Value('s', 0, n.textValue(), false);
        }
        if (n.isBoolean()) {
            return new Value('b', 0, null, n.booleanValue());
        }
        if (n.isNull()) {
            return new Value('z', 0, null, false);
        }
        return new Value('o', 0, null, false);
    }

    static boolean equal(Value a, Value b) {
        if (a.kind() != b.kind()) {
            return false;
        }
        switch (a.kind()) {
            case 'n':
                return a.num() == b.num();
            case 's':
                return a.str().equals(b.str());
            case 'b':
                return a.b() == b.b();
            case 'z':
                return true;
            default:
                return false;
        }
    }

    static boolean compare(Value v, String op, Value l) {
        if (v.kind() == 0) {
            return false;
        }
        switch (op) {
            case "==":
                return equal(v, l);
            case "!=":
                return v.kind() == l.kind() && !equal(v, l);
            default:
        }
        int c;
        if (v.kind() == 'n' && l.kind() == 'n') {
            c = Double.compare(v.num(), l.num());
            if (v.num() == l.num()) {
                c = 0; // -0 == 0, as Go compares
            }
        } else if (v.kind() == 's' && l.kind() == 's') {
            c = v.str().compareTo(l.str());
        } else {
            return false;
        }
        switch (op) {
            case ">":
                return c > 0;
            case ">=":
                return c >= 0;
            case "<":
                return c < 0;
            default:
                return c <= 0;
        }
    }
}
