package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAppendCanonicalSpellsAValueOneWay: documents that differ only in
// white space, key order and string escapes have one canonical form, and a
// canonical form is its own.
func TestAppendCanonicalSpellsAValueOneWay(t *testing.T) {
	for _, tc := range []struct {
		name string
		docs []string // the same value, spelt otherwise
		want string
	}{
		{"key order", []string{`{"path":"/pricing","ms":5}`, `{"ms":5,"path":"/pricing"}`, "{ \"ms\" : 5 ,\n\t\"path\":\"/pricing\" }"}, `{"ms":5,"path":"/pricing"}`},
		{"an escaped letter", []string{`{"city":"Zürich"}`, `{"city":"Z\u00fcrich"}`, `{"city":"Z\u00FCrich"}`, `{"\u0063ity":"Zürich"}`}, `{"city":"Zürich"}`},
		{"an escaped slash", []string{`{"path":"/pricing"}`, `{"path":"\/pricing"}`, `{"path":"\u002fpricing"}`}, `{"path":"/pricing"}`},
		{"a character outside the BMP", []string{`"😀"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`}, `"😀"`},
		{"control characters", []string{`"\u0000\u0008\u000c\u000a\u000d\u0009\u001f"`, `"\u0000\b\f\n\r\t\u001F"`}, `"\u0000\b\f\n\r\t\u001f"`},
		{"quotes and backslashes", []string{`"a\"b\\c"`, `"a\u0022b\u005cc"`}, `"a\"b\\c"`},
		{"line separators", []string{"\"a\u2028b\u2029\"", `"a\u2028b\u2029"`}, `"a\u2028b\u2029"`},
		{"markup, as Marshal writes it", []string{`"<a href='x'>&amp;</a>"`, `"\u003ca href='x'\u003e\u0026amp;\u003c/a\u003e"`}, `"<a href='x'>&amp;</a>"`},
		{"DEL and C1 controls, as themselves", []string{"\"\u007f\u0085\"", `"\u007f\u0085"`}, "\"\u007f\u0085\""},
		{"nested objects and arrays", []string{`{"b":[{"y":1,"x":2},[]],"a":{"d":{},"c":null}}`, `{"a":{"c":null,"d":{}},"b":[{"x":2,"y":1},[ ]]}`}, `{"a":{"c":null,"d":{}},"b":[{"x":2,"y":1},[]]}`},
		{"keys ordered as decoded bytes", []string{`{"é":1,"z":2,"Z":3,"":4,"a\"":5}`, `{"a\u0022":5,"\u00e9":1,"Z":3,"z":2,"":4}`}, `{"":4,"Z":3,"a\"":5,"z":2,"é":1}`},
		{"numbers as written", []string{`[1.0,1e2,-0,1E+2]`, ` [ 1.0 , 1e2 , -0 , 1E+2 ] `}, `[1.0,1e2,-0,1E+2]`},
		{"literals", []string{`[true,false,null]`}, `[true,false,null]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, doc := range tc.docs {
				got, ok := AppendCanonical([]byte("prefix:"), []byte(doc))
				if !ok || string(got) != "prefix:"+tc.want {
					t.Errorf("AppendCanonical(%s) = %s, %v; want prefix:%s", doc, got, ok, tc.want)
				}
				if again, ok := AppendCanonical(nil, []byte(tc.want)); !ok || string(again) != tc.want {
					t.Errorf("AppendCanonical(%s) = %s, %v: a canonical form is not its own", tc.want, again, ok)
				}
			}
		})
	}
}

// TestAppendCanonicalRefusesWhatCheckRefuses: a document the strict reader
// refuses has no canonical form, and dst is returned as it was given.
func TestAppendCanonicalRefusesWhatCheckRefuses(t *testing.T) {
	for _, doc := range []string{
		``, ` `, `{`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a" 1}`, `{1:2}`, `tru`, `01`, `1.`, `"abc`, `"\x"`, `"\u12"`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"b":{"x":1,"y":2,"x":3},"a":1}`,
		`"\udc00"`, `"\ud800"`, "\"\xff\"", "\"a\x01b\"", `1 2`, `{} x`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		if Check([]byte(doc), Options{}) == nil {
			t.Fatalf("Check takes %q: not a refusal to test", doc)
		}
		got, ok := AppendCanonical([]byte("prefix"), []byte(doc))
		if ok || string(got) != "prefix" {
			t.Errorf("AppendCanonical(%q) = %q, %v; want it refused and dst as given", doc, got, ok)
		}
	}
	deep := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if got, ok := AppendCanonical(nil, []byte(deep)); !ok || string(got) != deep {
		t.Errorf("nested MaxDepth deep: %v; want it taken, as Check takes it", ok)
	}
}

// TestAppendCanonicalIsEncodingJSONsSpelling: on random documents, the
// canonical form is what es.Command.Fingerprint hashes — encoding/json
// decoding with UseNumber, then Marshal — and the same for the document
// spelt otherwise (keys shuffled, white space added, characters escaped).
func TestAppendCanonicalIsEncodingJSONsSpelling(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		v := randomValue(rng, 0)
		plain, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(plain))
		dec.UseNumber()
		var back any
		if err := dec.Decode(&back); err != nil {
			t.Fatal(err)
		}
		want, _ := Marshal(back)
		for _, doc := range [][]byte{plain, respell(rng, v)} {
			got, ok := AppendCanonical(nil, doc)
			if !ok || !bytes.Equal(got, want) {
				t.Fatalf("document %d: AppendCanonical(%s) = %s, %v; want %s", i, doc, got, ok, want)
			}
		}
	}
}

// TestAppendCanonicalAllocatesNothingOfItsOwn: into a buffer with room,
// a document whose keys need no escape costs no allocation, sorted or not.
func TestAppendCanonicalAllocatesNothingOfItsOwn(t *testing.T) {
	for _, doc := range []string{`{"path":"/pricing","ms":5}`, `{"z":{"b":[1,{"d":"\u00e9","c":"\/"}],"a":true},"y":null}`} {
		buf, b := make([]byte, 0, 1024), []byte(doc)
		if n := testing.AllocsPerRun(100, func() { _, _ = AppendCanonical(buf[:0], b) }); n != 0 {
			t.Errorf("AppendCanonical(%s): %v allocations, want 0", doc, n)
		}
	}
}

// randomValue is a JSON value as Go decodes one, with the strings and keys
// that need escapes or sort unlike their escapes.
func randomValue(rng *rand.Rand, depth int) any {
	texts := []string{"", "a", "Zürich", "/p", `"q"`, `back\slash`, "\x00\x1f\b\f\n\r\t", "\u2028\u2029", "<&>", "😀", "\u007f\u0085", "é", "e\u0301"}
	k := rng.IntN(8)
	if depth > 4 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		return texts[rng.IntN(len(texts))]
	case 1:
		return json.Number([]string{"0", "-0", "1.50", "1e3", "-2E-2", "12345678901234567890"}[rng.IntN(6)])
	case 2:
		return []any{true, false, nil}[rng.IntN(3)]
	case 3:
		return texts[rng.IntN(len(texts))] + texts[rng.IntN(len(texts))]
	case 4, 5:
		a := make([]any, rng.IntN(4))
		for i := range a {
			a[i] = randomValue(rng, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for range rng.IntN(6) {
			m[texts[rng.IntN(len(texts))]+fmt.Sprint(rng.IntN(3))] = randomValue(rng, depth+1)
		}
		return m
	}
}

// respell writes v as another producer might: keys in random order, white
// space between tokens, every other character escaped.
func respell(rng *rand.Rand, v any) []byte {
	var b bytes.Buffer
	var write func(v any)
	ws := func() {
		b.WriteString([]string{"", " ", "\n\t", "\r\n  "}[rng.IntN(4)])
	}
	str := func(s string) {
		b.WriteByte('"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r < 0x20 || rng.IntN(2) == 0:
				if r > 0xFFFF {
					r -= 0x10000
					fmt.Fprintf(&b, `\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
				} else {
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			case r == '/' && rng.IntN(2) == 0:
				b.WriteString(`\/`)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	write = func(v any) {
		ws()
		switch v := v.(type) {
		case string:
			str(v)
		case json.Number:
			b.WriteString(string(v))
		case bool:
			fmt.Fprint(&b, v)
		case nil:
			b.WriteString("null")
		case []any:
			b.WriteByte('[')
			for i, e := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				write(e)
			}
			ws()
			b.WriteByte(']')
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				ws()
				str(k)
				ws()
				b.WriteByte(':')
				write(v[k])
			}
			ws()
			b.WriteByte('}')
		}
		ws()
	}
	write(v)
	return b.Bytes()
}

// FuzzAppendCanonical: any input is taken exactly when Check takes it, and
// then spelt as encoding/json (UseNumber, Marshal) spells its value, a
// form that is its own.
func FuzzAppendCanonical(f *testing.F) {
	for _, seed := range []string{`{"b":1,"a":[true,null,"\u00e9\/"]}`, `{"a":1,"a":2}`, `"\ud83d\ude00"`, "\"\u2028\"", `[1e5,-0.0]`, `{"":{"":{}}}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, ok := AppendCanonical(nil, doc)
		if ok != (Check(doc, Options{MaxBytes: len(doc) + 1}) == nil) {
			t.Fatalf("AppendCanonical(%q) ok = %v, Check says otherwise", doc, ok)
		}
		if !ok {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("encoding/json refuses %q, which Check takes: %v", doc, err)
		}
		want, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AppendCanonical(%q) = %s, want %s", doc, got, want)
		}
		if again, ok := AppendCanonical(nil, got); !ok || !bytes.Equal(again, got) {
			t.Fatalf("the canonical form %s is not its own: %s", got, again)
		}
	})
}
