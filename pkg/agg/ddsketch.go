// The quantile sketch: DDSketch with a logarithmic index mapping and
// buffered paginated stores, as github.com/DataDog/sketches-go v1.4.8
// builds it (ddsketch.NewDDSketchFromStoreProvider(mapping.
// NewLogarithmicMapping(RelativeAccuracy), store.
// BufferedPaginatedStoreConstructor)), adapted from that library's
// ddsketch.go, mapping/logarithmic_mapping.go and
// store/buffered_paginated.go, which are licensed under the Apache License
// 2.0 — "This product includes software developed at Datadog
// (https://www.datadoghq.com/). Copyright 2021 Datadog, Inc."
//
// Why a copy: the library's sketch, mapping and store packages import its
// protobuf messages, and protobuf's reflection (a MethodByName with a
// non-constant name) makes the linker keep every exported method of every
// reachable type: about 8 MB in each function binary that aggregates.
// Only the parts a State uses are here, with the same arithmetic, the same
// store layout (buffer, pages, compaction points) and so the same bytes:
// TestSketchMatchesLibrary encodes the same values with both and compares
// the bytes, and decodes the library's. The wire primitives come from the
// library's encoding package, which imports no protobuf.

package agg

import (
	"errors"
	"io"
	"math"
	"slices"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"
)

// logMapping is mapping.LogarithmicMapping with index offset 0.
type logMapping struct {
	gamma, multiplier                    float64
	minIndexableValue, maxIndexableValue float64
}

const (
	expOverflow      = 7.094361393031e+02      // where math.Exp overflows
	minNormalFloat64 = 2.2250738585072014e-308 // 2^-1022
)

func newLogMapping(relativeAccuracy float64) logMapping {
	gamma := (1 + relativeAccuracy) / (1 - relativeAccuracy)
	multiplier := 1 / math.Log(gamma)
	return logMapping{
		gamma:      gamma,
		multiplier: multiplier,
		minIndexableValue: math.Max(
			math.Exp((math.MinInt32-0)/multiplier+1),
			minNormalFloat64*gamma,
		),
		maxIndexableValue: math.Min(
			math.Exp((math.MaxInt32-0)/multiplier-1),
			math.Exp(expOverflow)/(2*gamma)*(gamma+1),
		),
	}
}

func (m *logMapping) index(value float64) int {
	index := math.Log(value)*m.multiplier + 0
	if index >= 0 {
		return int(index)
	}
	return int(index) - 1
}

func (m *logMapping) value(index int) float64 {
	lower := math.Exp((float64(index) - 0) / m.multiplier)
	return lower * (1 + (1 - 2/(1+m.gamma)))
}

// quantileMapping is the index mapping of every State's sketch; it is not
// written into encodings.
var quantileMapping = newLogMapping(RelativeAccuracy)

// sketch is a DDSketch: counts of values by logarithmic bucket, for
// quantiles within RelativeAccuracy.
type sketch struct {
	pos, neg  pagedStore
	zeroCount float64
	// bufs backs the first buffers of pos and neg (newBufferCap each), so
	// a new sketch is one allocation, not three (a batch makes one for
	// each key and window). Each store's slice is capped at its own half:
	// growing one reallocates it, never writing into the other's.
	bufs [2 * newBufferCap]int
}

var (
	errUntrackable = errors.New("agg: value cannot be tracked by the quantile sketch")
	errEmptySketch = errors.New("agg: no values in the quantile sketch")
)

func newSketch() *sketch {
	s := &sketch{}
	s.pos = newPagedStoreOn(s.bufs[:0:newBufferCap])
	s.neg = newPagedStoreOn(s.bufs[newBufferCap : newBufferCap : 2*newBufferCap])
	return s
}

// clear empties s as newSketch makes it (pagedStore.clear).
func (s *sketch) clear() {
	s.pos.clear()
	s.neg.clear()
	s.zeroCount = 0
}

func (s *sketch) add(value float64) error {
	m := &quantileMapping
	switch {
	case value > m.minIndexableValue:
		if value > m.maxIndexableValue {
			return errUntrackable
		}
		s.pos.add(m.index(value))
	case value < -m.minIndexableValue:
		if value < -m.maxIndexableValue {
			return errUntrackable
		}
		s.neg.add(m.index(-value))
	case math.IsNaN(value):
		return errUntrackable
	default:
		s.zeroCount++
	}
	return nil
}

func (s *sketch) copy() *sketch {
	return &sketch{pos: s.pos.copy(), neg: s.neg.copy(), zeroCount: s.zeroCount}
}

func (s *sketch) mergeWith(o *sketch) {
	s.pos.mergeWith(&o.pos)
	s.neg.mergeWith(&o.neg)
	s.zeroCount += o.zeroCount
}

// settle compacts both stores (see pagedStore.settled).
func (s *sketch) settle() {
	s.pos.compact()
	s.neg.compact()
}

func (s *sketch) isEmpty() bool {
	return s.zeroCount == 0 && s.pos.isEmpty() && s.neg.isEmpty()
}

func (s *sketch) valueAtQuantile(quantile float64) (float64, error) {
	if quantile < 0 || quantile > 1 {
		return math.NaN(), errors.New("agg: the quantile must be between 0 and 1")
	}
	count := s.zeroCount + s.pos.totalCount() + s.neg.totalCount()
	if count == 0 {
		return math.NaN(), errEmptySketch
	}
	// An explicit conversion: no fused multiply-add (the library's note).
	rank := float64(quantile * (count - 1))
	negCount := s.neg.totalCount()
	switch {
	case rank < negCount:
		return -quantileMapping.value(s.neg.keyAtRank(negCount - 1 - rank)), nil
	case rank < s.zeroCount+negCount:
		return 0, nil
	default:
		return quantileMapping.value(s.pos.keyAtRank(rank - s.zeroCount - negCount)), nil
	}
}

// encode is DDSketch.Encode with the index mapping omitted.
func (s *sketch) encode(b *[]byte) {
	if s.zeroCount != 0 {
		enc.EncodeFlag(b, enc.FlagZeroCountVarFloat)
		enc.EncodeVarfloat64(b, s.zeroCount)
	}
	s.pos.encode(b, enc.FlagTypePositiveStore)
	s.neg.encode(b, enc.FlagTypeNegativeStore)
}

var errUnknownFlag = errors.New("agg: unknown flag in the quantile sketch")

// decodeSketch is DecodeDDSketch with the State's mapping, into s, empty
// (newSketch, or cleared).
func decodeSketch(s *sketch, bb []byte) error {
	b := &bb
	for len(*b) > 0 {
		flag, err := enc.DecodeFlag(b)
		if err != nil {
			return err
		}
		switch flag.Type() {
		case enc.FlagTypePositiveStore:
			if err := s.pos.decodeAndMergeWith(b, flag.SubFlag()); err != nil {
				return err
			}
		case enc.FlagTypeNegativeStore:
			if err := s.neg.decodeAndMergeWith(b, flag.SubFlag()); err != nil {
				return err
			}
		case enc.FlagTypeIndexMapping:
			if flag != enc.FlagIndexMappingBaseLogarithmic {
				return errors.New("agg: the quantile sketch has another index mapping")
			}
			gamma, err := enc.DecodeFloat64LE(b)
			if err != nil {
				return err
			}
			offset, err := enc.DecodeFloat64LE(b)
			if err != nil {
				return err
			}
			const tol = 1e-12
			if math.Abs(gamma-quantileMapping.gamma) > tol*math.Max(math.Abs(gamma), math.Abs(quantileMapping.gamma)) || offset != 0 {
				return errors.New("agg: index mapping mismatch")
			}
		default:
			switch flag {
			case enc.FlagZeroCountVarFloat:
				n, err := enc.DecodeVarfloat64(b)
				if err != nil {
					return err
				}
				s.zeroCount += n
			case enc.FlagCount, enc.FlagSum, enc.FlagMin, enc.FlagMax:
				// Exact summary statistics are ignored, as the library does.
				if len(*b) < 8 {
					return io.EOF
				}
				*b = (*b)[8:]
			default:
				return errUnknownFlag
			}
		}
	}
	return nil
}

// pagedStore is store.BufferedPaginatedStore: indexes added once sit in
// a buffer, compacted into pages of 32 counts once enough of them share a
// page.
type pagedStore struct {
	buffer                     []int
	bufferCompactionTriggerLen int
	pages                      [][]float64 // len == cap
	minPageIndex               int         // maxInt iff pages are unused
	// settled: compact has run and nothing was added since (the buffer is
	// sorted, and no entry of it has a page to go to), so compact, and the
	// encoding and the queries that call it, only read the store: a
	// settled sketch may be encoded by several goroutines at once.
	settled bool
}

const (
	pageLenLog2     = 5
	pageLen         = 1 << pageLenLog2
	pageLenMask     = pageLen - 1
	ptrSize         = 32 << (^uintptr(0) >> 63)
	intSize         = 32 << (^uint(0) >> 63)
	bufferEntrySize = intSize
	float64size     = 64
	maxInt          = int(^uint(0) >> 1)
)

// newPagedStoreOn returns an empty store with buffer (empty, of capacity
// newBufferCap) as its buffer.
func newPagedStoreOn(buffer []int) pagedStore {
	return pagedStore{
		buffer:                     buffer,
		bufferCompactionTriggerLen: 2 * pageLen,
		minPageIndex:               maxInt,
	}
}

// newBufferCap is a new store's buffer capacity. When the buffer is
// compacted depends on its capacity (add), so a cleared store starts
// again at this capacity, as a new one does.
const newBufferCap = 4

// clear empties s as newPagedStoreOn makes it, keeping the memory of its
// buffer's first entries.
func (s *pagedStore) clear() {
	*s = pagedStore{buffer: s.buffer[:0:newBufferCap], bufferCompactionTriggerLen: 2 * pageLen, minPageIndex: maxInt}
}

func pageIndex(index int) int { return index >> pageLenLog2 }
func lineIndex(index int) int { return index & pageLenMask }
func indexOf(page, line int) int {
	return page<<pageLenLog2 + line
}

func (s *pagedStore) page(pi int, ensureExists bool) []float64 {
	if pi >= s.minPageIndex && pi < s.minPageIndex+len(s.pages) {
		page := &s.pages[pi-s.minPageIndex]
		if ensureExists && len(*page) == 0 {
			*page = append(*page, make([]float64, pageLen)...)
			s.settled = false
		}
		return *page
	}
	if !ensureExists {
		return nil
	}
	s.settled = false
	if pi < s.minPageIndex {
		if s.minPageIndex == maxInt {
			if len(s.pages) == 0 {
				s.pages = append(s.pages, make([][]float64, newPagesLen(1))...)
			}
			s.minPageIndex = pi - len(s.pages)/2
		} else {
			newLen := newPagesLen(s.minPageIndex - pi + 1 + len(s.pages))
			addedLen := newLen - len(s.pages)
			s.pages = append(s.pages, make([][]float64, addedLen)...)
			copy(s.pages[addedLen:], s.pages)
			for i := 0; i < addedLen; i++ {
				s.pages[i] = nil
			}
			s.minPageIndex -= addedLen
		}
	} else {
		s.pages = append(s.pages, make([][]float64, newPagesLen(pi-s.minPageIndex+1)-len(s.pages))...)
	}
	page := &s.pages[pi-s.minPageIndex]
	if len(*page) == 0 {
		*page = append(*page, make([]float64, pageLen)...)
	}
	return *page
}

func newPagesLen(required int) int {
	const growth = 64 * 8 / ptrSize
	return (required + growth - 1) & -growth
}

func (s *pagedStore) compact() {
	if s.settled {
		return
	}
	slices.Sort(s.buffer)
	for pos := 0; pos < len(s.buffer); {
		start := pos
		pi := pageIndex(s.buffer[start])
		pos++
		for pos < len(s.buffer) && pageIndex(s.buffer[pos]) == pi {
			pos++
		}
		end := pos
		ensureExists := (end-start)*bufferEntrySize >= pageLen*float64size
		page := s.page(pi, ensureExists)
		if len(page) > 0 {
			for _, index := range s.buffer[start:end] {
				page[lineIndex(index)]++
			}
			copy(s.buffer[start:], s.buffer[end:])
			s.buffer = s.buffer[:len(s.buffer)+start-end]
			pos = start
		}
	}
	s.bufferCompactionTriggerLen = len(s.buffer) + pageLen
	s.settled = true
}

func (s *pagedStore) add(index int) {
	pi := pageIndex(index)
	if pi >= s.minPageIndex && pi < s.minPageIndex+len(s.pages) {
		if page := s.pages[pi-s.minPageIndex]; len(page) > 0 {
			page[lineIndex(index)]++
			return
		}
	}
	if len(s.buffer) == cap(s.buffer) && len(s.buffer) >= s.bufferCompactionTriggerLen {
		s.compact()
	}
	s.buffer = append(s.buffer, index)
	s.settled = false
}

func (s *pagedStore) addWithCount(index int, count float64) {
	switch count {
	case 0:
	case 1:
		s.add(index)
	default:
		s.page(pageIndex(index), true)[lineIndex(index)] += count
	}
}

func (s *pagedStore) isEmpty() bool {
	if len(s.buffer) > 0 {
		return false
	}
	for _, page := range s.pages {
		for _, c := range page {
			if c > 0 {
				return false
			}
		}
	}
	return true
}

func (s *pagedStore) totalCount() float64 {
	total := float64(len(s.buffer))
	for _, page := range s.pages {
		for _, c := range page {
			total += c
		}
	}
	return total
}

func (s *pagedStore) maxIndex() (int, bool) {
	empty := true
	var max int
	for _, index := range s.buffer {
		if empty || index > max {
			empty = false
			max = index
		}
	}
	for pi := s.minPageIndex + len(s.pages) - 1; pi >= s.minPageIndex && (empty || pi >= pageIndex(max)); pi-- {
		page := s.pages[pi-s.minPageIndex]
		if len(page) == 0 {
			continue
		}
		start := 0
		if !empty && pi == pageIndex(max) {
			start = lineIndex(max)
		}
		for li := len(page) - 1; li >= start; li-- {
			if page[li] > 0 {
				return indexOf(pi, li), true
			}
		}
	}
	return max, !empty
}

func (s *pagedStore) keyAtRank(rank float64) int {
	if rank < 0 {
		rank = 0
	}
	if !slices.IsSorted(s.buffer) { // a settled store's is: its queries only read it
		slices.Sort(s.buffer)
	}
	cumul := float64(0)
	pos := 0
	for off, page := range s.pages {
		for li, count := range page {
			index := indexOf(s.minPageIndex+off, li)
			for ; pos < len(s.buffer) && s.buffer[pos] < index; pos++ {
				cumul++
				if cumul > rank {
					return s.buffer[pos]
				}
			}
			cumul += count
			if cumul > rank {
				return index
			}
		}
	}
	for ; pos < len(s.buffer); pos++ {
		cumul++
		if cumul > rank {
			return s.buffer[pos]
		}
	}
	if max, ok := s.maxIndex(); ok {
		return max
	}
	return 0
}

func (s *pagedStore) mergeWith(o *pagedStore) {
	for off, oPage := range o.pages {
		if len(oPage) == 0 {
			continue
		}
		page := s.page(o.minPageIndex+off, true)
		for i, c := range oPage {
			page[i] += c
		}
	}
	for _, index := range o.buffer {
		s.add(index)
	}
}

func (s *pagedStore) copy() pagedStore {
	buffer := make([]int, len(s.buffer))
	copy(buffer, s.buffer)
	pages := make([][]float64, len(s.pages))
	for i, page := range s.pages {
		if len(page) > 0 {
			pages[i] = slices.Clone(page)
		}
	}
	return pagedStore{buffer: buffer, bufferCompactionTriggerLen: s.bufferCompactionTriggerLen, pages: pages, minPageIndex: s.minPageIndex, settled: s.settled}
}

func (s *pagedStore) encode(b *[]byte, t enc.FlagType) {
	s.compact()
	if len(s.buffer) > 0 {
		enc.EncodeFlag(b, enc.NewFlag(t, enc.BinEncodingIndexDeltas))
		enc.EncodeUvarint64(b, uint64(len(s.buffer)))
		prev := 0
		for _, index := range s.buffer {
			enc.EncodeVarint64(b, int64(index-prev))
			prev = index
		}
	}
	for off, page := range s.pages {
		if len(page) > 0 {
			enc.EncodeFlag(b, enc.NewFlag(t, enc.BinEncodingContiguousCounts))
			enc.EncodeUvarint64(b, uint64(len(page)))
			enc.EncodeVarint64(b, int64(indexOf(s.minPageIndex+off, 0)))
			enc.EncodeVarint64(b, 1)
			for _, c := range page {
				enc.EncodeVarfloat64(b, c)
			}
		}
	}
}

func (s *pagedStore) decodeAndMergeWith(b *[]byte, mode enc.SubFlag) error {
	switch mode {
	case enc.BinEncodingIndexDeltas:
		n, err := enc.DecodeUvarint64(b)
		if err != nil {
			return err
		}
		remaining := int(n)
		index := int64(0)
		for {
			batch := min(remaining, max(cap(s.buffer), s.bufferCompactionTriggerLen)-len(s.buffer))
			for i := 0; i < batch; i++ {
				d, err := enc.DecodeVarint64(b)
				if err != nil {
					return err
				}
				index += d
				s.buffer = append(s.buffer, int(index))
			}
			s.settled = false
			remaining -= batch
			if remaining == 0 {
				return nil
			}
			s.compact()
		}
	case enc.BinEncodingContiguousCounts:
		n, err := enc.DecodeUvarint64(b)
		if err != nil {
			return err
		}
		offset, err := enc.DecodeVarint64(b)
		if err != nil {
			return err
		}
		delta, err := enc.DecodeVarint64(b)
		if err != nil {
			return err
		}
		for i := uint64(0); i < n; {
			page := s.page(pageIndex(int(offset)), true)
			li := lineIndex(int(offset))
			for li >= 0 && li < pageLen && i < n {
				c, err := enc.DecodeVarfloat64(b)
				if err != nil {
					return err
				}
				page[li] += c
				li += int(delta)
				offset += delta
				i++
			}
		}
		return nil
	case enc.BinEncodingIndexDeltasAndCounts:
		n, err := enc.DecodeUvarint64(b)
		if err != nil {
			return err
		}
		index := int64(0)
		for i := uint64(0); i < n; i++ {
			d, err := enc.DecodeVarint64(b)
			if err != nil {
				return err
			}
			c, err := enc.DecodeVarfloat64(b)
			if err != nil {
				return err
			}
			index += d
			s.addWithCount(int(index), c)
		}
		return nil
	}
	return errors.New("agg: unknown bin encoding in the quantile sketch")
}
