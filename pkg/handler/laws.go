package handler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// CheckMergeLaws checks, on values, the laws a windowed handler relies on
// (see Aggregate): an aggregate built by merging the values' one-value
// aggregates in any grouping and order encodes to the same bytes as one
// built by adding them in order (associative, commutative, with the zero
// value as identity, canonical encoding); the encoding reads back; merging
// leaves its argument as it was, then and after later merges into the
// result (Merge keeps no reference to it); a merge's encoding is no longer than its
// operands' together; and the aggregate of all the values, and of each
// part merged, renders as JSON (a result that does not — a NaN, a
// MarshalJSON that fails — is set aside rather than put on the stream; a
// record whose one-value aggregate alone holds a NaN or an infinity is set
// aside in its place).
// It tries rounds random splits and orders (seeded by seed) and returns the
// first violation found, naming it; a panic is reported naming the call
// that panicked. Call it from a test of your aggregate.
func CheckMergeLaws[T any, V any, A interface {
	*T
	Aggregate[V, A]
}](values []V, rounds int, seed uint64) error {
	call := "Add" // the aggregate's method running, named if it panics
	enc := func(a A) []byte {
		call = "MarshalBinary"
		b, err := a.MarshalBinary()
		if err != nil {
			panic(fmt.Errorf("MarshalBinary failed: %w", err)) // reported by the recover below
		}
		return b
	}
	rendered := func(a A, what string) error {
		call = "MarshalJSON"
		if _, err := json.Marshal(a); err != nil {
			return fmt.Errorf("%s does not render as JSON, so its result could never be put on the stream: %w", what, err)
		}
		return nil
	}
	var failure error
	func() {
		defer func() {
			if r := recover(); r != nil {
				if err, ok := r.(error); ok && call == "MarshalBinary" {
					failure = err
					return
				}
				failure = fmt.Errorf("%s panicked: %v", call, r)
			}
		}()
		ref := A(new(T))
		for _, v := range values {
			ref.Add(v)
		}
		want := enc(ref)
		if failure = rendered(ref, "the aggregate of all the values"); failure != nil {
			return
		}
		call = "UnmarshalBinary"
		back := A(new(T))
		if err := back.UnmarshalBinary(want); err != nil {
			failure = fmt.Errorf("UnmarshalBinary of its own encoding: %w", err)
			return
		}
		if got := enc(back); !bytes.Equal(got, want) {
			failure = fmt.Errorf("encoding does not read back: %x became %x", want, got)
			return
		}
		call = "Merge"
		back.Merge(A(new(T)))
		if got := enc(back); !bytes.Equal(got, want) {
			failure = fmt.Errorf("merging the zero value changed the aggregate (identity)")
			return
		}
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		for round := range rounds {
			// Split the values, in a shuffled order, into 1–4 parts, each
			// built by merging one-value aggregates; merge the parts in a
			// random order and grouping.
			order := rng.Perm(len(values))
			parts := make([]A, 1+rng.IntN(4))
			for i := range parts {
				parts[i] = A(new(T))
			}
			var ones []A // each one-value aggregate merged, to find one a later merge changed
			var onesEnc [][]byte
			for _, i := range order {
				one := A(new(T))
				call = "Add"
				one.Add(values[i])
				p := parts[rng.IntN(len(parts))]
				before, oneBefore := enc(p), enc(one)
				call = "Merge"
				p.Merge(one)
				if !bytes.Equal(enc(one), oneBefore) {
					failure = fmt.Errorf("round %d: Merge changed its argument", round)
					return
				}
				ones, onesEnc = append(ones, one), append(onesEnc, oneBefore)
				if n := len(enc(p)); n > len(before)+len(oneBefore) {
					failure = fmt.Errorf("round %d: merging a %d-byte and a %d-byte aggregate gave %d bytes, more than both together", round, len(before), len(oneBefore), n)
					return
				}
			}
			for len(parts) > 1 {
				i := rng.IntN(len(parts) - 1)
				a, b := parts[i], parts[i+1]
				if rng.IntN(2) == 0 {
					a, b = b, a // commutativity
				}
				if failure = rendered(a, fmt.Sprintf("round %d: a part's aggregate", round)); failure != nil {
					return
				}
				call = "Merge"
				a.Merge(b)
				parts = append(parts[:i], append([]A{a}, parts[i+2:]...)...)
			}
			for j, one := range ones {
				if !bytes.Equal(enc(one), onesEnc[j]) {
					failure = fmt.Errorf("round %d: a merge changed an aggregate merged before (Merge keeps a reference to its argument)", round)
					return
				}
			}
			if got := enc(parts[0]); !bytes.Equal(got, want) {
				failure = fmt.Errorf("round %d: merging the values in another grouping and order gave %x, adding them in order %x (Merge is not associative and commutative, or the encoding is not canonical)", round, got, want)
				return
			}
		}
	}()
	return failure
}
