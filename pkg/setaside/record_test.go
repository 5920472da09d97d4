package setaside

import (
	"encoding/json"
	"testing"
)

func TestUnescapeHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"a\u003cb\u003e\u0026"`, `"a<b>&"`},
		{`"\\u003c"`, `"\\u003c"`},          // an escaped backslash, then text
		{`"\\\u003c"`, `"\\<"`},             // an escaped backslash, then an escape
		{`"\u003C\"\u2028"`, `"<\"\u2028"`}, // upper-case hex; other escapes kept
		{`{"k":1}`, `{"k":1}`},
	}
	for _, tt := range tests {
		got := UnescapeHTML([]byte(tt.in))
		if string(got) != tt.want {
			t.Errorf("UnescapeHTML(%s) = %s, want %s", tt.in, got, tt.want)
		}
		var a, b any
		if json.Unmarshal([]byte(tt.in), &a) != nil || json.Unmarshal(got, &b) != nil {
			t.Errorf("%s: not JSON any more", tt.in)
			continue
		}
		if ja, _ := json.Marshal(a); string(ja) != string(mustMarshal(b)) {
			t.Errorf("%s: decodes to %v, before %v", tt.in, b, a)
		}
	}
}

func mustMarshal(v any) []byte { b, _ := json.Marshal(v); return b }

func TestSplit(t *testing.T) {
	data := make([]byte, 2*ChunkBytes+10)
	for i := range data {
		data[i] = byte(i)
	}
	head, chunks := split(Item{Source: "s", SequenceNumber: "7", Kind: ItemSetAside, Data: data, ExpiresAt: 9})
	if head.DataBytes != len(data) || head.DataChunks != 3 || len(head.Data) != ChunkBytes || len(chunks) != 2 {
		t.Fatalf("head dataBytes %d chunks %d data %d; %d chunk items", head.DataBytes, head.DataChunks, len(head.Data), len(chunks))
	}
	if chunks[0].SequenceNumber != "7#001" || chunks[1].SequenceNumber != "7#002" || len(chunks[1].Data) != 10 || chunks[1].Kind != ItemChunk || chunks[1].ExpiresAt != 9 {
		t.Errorf("chunks %+v", chunks[1])
	}
	head, chunks = split(Item{Source: "s", SequenceNumber: "8", Data: make([]byte, MaxDataBytes+1)})
	if !head.DataTruncated || head.DataBytes != MaxDataBytes+1 || head.DataChunks != 64 || len(chunks) != 63 {
		t.Errorf("over MaxDataBytes: truncated %v, dataBytes %d, chunks %d", head.DataTruncated, head.DataBytes, head.DataChunks)
	}
	head, chunks = split(Item{Source: "s", SequenceNumber: "9", Data: []byte("x")})
	if head.DataChunks != 0 || chunks != nil || head.DataBytes != 1 {
		t.Errorf("small: %+v %v", head, chunks)
	}
}
