// Command go_vectors writes Kafka v2 record batches built by an independent Go encoder and compressed by
// the Go compression libraries that Go Kafka clients use (klauspost/compress zstd and s2, pierrec/lz4,
// eapache/go-xerial-snappy, compress/gzip), configured as franz-go configures them.  It is NOT franz-go:
// the batch encoder below is this project's own code, written from Kafka's record-batch v2 layout.
//
// Build and run in GOPATH mode against Debian's packaged sources (no network, no go.mod):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go run ./scripts/go_vectors -out tests/vectors/go
//
// Every case is written as CASE.bin (the batches, concatenated, as a log holds them) and CASE.json (every
// batch and record field; see README.md).  The output is deterministic: fixed timestamps, fixed seeds,
// single-threaded compressors.
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"unicode/utf8"

	xsnappy "github.com/eapache/go-xerial-snappy"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4"
)

// ------------------------------------------------------------------------------------------- model

// Payload is a key, value or header value: null, or Unit repeated Times times (Times >= 1).  Keeping the
// repetition lets the sidecar stay small for large values.
type Payload struct {
	Null  bool
	Unit  []byte
	Times int
}

func null() Payload                    { return Payload{Null: true} }
func raw(b []byte) Payload             { return Payload{Unit: b, Times: 1} }
func str(s string) Payload             { return raw([]byte(s)) }
func rep(s string, times int) Payload  { return Payload{Unit: []byte(s), Times: times} }
func repB(b []byte, times int) Payload { return Payload{Unit: b, Times: times} }
func (p Payload) Bytes() []byte {
	if p.Null {
		return nil
	}
	return bytes.Repeat(p.Unit, p.Times)
}

type Header struct {
	Key   string
	Value Payload
}

// Rec is one record as a producer appends it.  Timestamp is the record's CreateTime (what base timestamp +
// delta gives on the wire); OffsetDelta is its offset relative to the batch's base offset.
type Rec struct {
	OffsetDelta int32
	Timestamp   int64
	Key         Payload
	Value       Payload
	Headers     []Header
}

const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

var codecNames = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Compressor turns the records section into the batch payload.
type Compressor struct {
	Codec    int
	Describe string                // the Go call(s) that made the payload
	Fn       func([]byte) []byte   // the whole records section at once
	Stream   func([][]byte) []byte // or record by record (the streaming path)
}

// Batch is one v2 record batch to write.
type Batch struct {
	BaseOffset      int64
	LeaderEpoch     int32
	Comp            Compressor
	LogAppendTime   int64 // > 0: timestamp type LogAppendTime, maxTimestamp = this (as a broker stamps it)
	Transactional   bool
	Control         bool
	LastOffsetDelta *int32 // nil: the last record's offset delta
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	Records         []Rec
	Marker          *ControlInfo // for marker batches: what the marker says (for the sidecar)
}

type ControlInfo struct {
	Type             string `json:"type"`
	TypeID           int16  `json:"type_id"`
	KeyVersion       int16  `json:"key_version"`
	MarkerVersion    int16  `json:"marker_version"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
}

type Case struct {
	Name        string
	Description string
	Batches     []*Batch
}

// ------------------------------------------------------------------------------ v2 batch encoding

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func appendVarint(b []byte, v int32) []byte { // zigzag int32
	return appendUvarint(b, uint64(uint32((v<<1)^(v>>31))))
}

func appendVarlong(b []byte, v int64) []byte { // zigzag int64
	return appendUvarint(b, uint64((v<<1)^(v>>63)))
}

func appendBytesField(b []byte, p Payload) []byte {
	if p.Null {
		return appendVarint(b, -1)
	}
	data := p.Bytes()
	b = appendVarint(b, int32(len(data)))
	return append(b, data...)
}

func encodeRecord(r Rec, baseTimestamp int64) []byte {
	body := []byte{0} // attributes: none defined
	body = appendVarlong(body, r.Timestamp-baseTimestamp)
	body = appendVarint(body, r.OffsetDelta)
	body = appendBytesField(body, r.Key)
	body = appendBytesField(body, r.Value)
	body = appendVarint(body, int32(len(r.Headers)))
	for _, h := range r.Headers {
		body = appendVarint(body, int32(len(h.Key)))
		body = append(body, h.Key...)
		body = appendBytesField(body, h.Value)
	}
	out := appendVarint(nil, int32(len(body)))
	return append(out, body...)
}

const maxInt32 = int32(^uint32(0) >> 1)

// incrementSequence is Kafka's DefaultRecordBatch.incrementSequence: after 2147483647 comes 0.
func incrementSequence(seq, inc int32) int32 {
	if seq > maxInt32-inc {
		return inc - (maxInt32 - seq) - 1
	}
	return seq + inc
}

// Encoded is a batch as written, with what the sidecar reports about it.
type Encoded struct {
	Bytes           []byte
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	CRC             uint32
	Uncompressed    []byte
	PayloadSize     int
}

func (b *Batch) attributes() int16 {
	a := int16(b.Comp.Codec)
	if b.LogAppendTime > 0 {
		a |= 0x08
	}
	if b.Transactional {
		a |= 0x10
	}
	if b.Control {
		a |= 0x20
	}
	return a
}

func (b *Batch) encode() Encoded {
	if len(b.Records) == 0 {
		panic("empty batch")
	}
	baseTs := b.Records[0].Timestamp
	maxTs := baseTs
	var records []byte
	var each [][]byte
	for _, r := range b.Records {
		if r.Timestamp > maxTs {
			maxTs = r.Timestamp
		}
		each = append(each, encodeRecord(r, baseTs))
		records = append(records, each[len(each)-1]...)
	}
	if b.LogAppendTime > 0 {
		maxTs = b.LogAppendTime
	}
	lastDelta := b.Records[len(b.Records)-1].OffsetDelta
	if b.LastOffsetDelta != nil {
		lastDelta = *b.LastOffsetDelta
	}
	payload := records
	if b.Comp.Fn != nil {
		payload = b.Comp.Fn(records)
	} else if b.Comp.Stream != nil {
		payload = b.Comp.Stream(each)
	}
	attrs := b.attributes()
	buf := make([]byte, 61, 61+len(payload))
	be := binary.BigEndian
	be.PutUint64(buf[0:], uint64(b.BaseOffset))
	be.PutUint32(buf[8:], uint32(49+len(payload)))
	be.PutUint32(buf[12:], uint32(b.LeaderEpoch))
	buf[16] = 2
	be.PutUint16(buf[21:], uint16(attrs))
	be.PutUint32(buf[23:], uint32(lastDelta))
	be.PutUint64(buf[27:], uint64(baseTs))
	be.PutUint64(buf[35:], uint64(maxTs))
	be.PutUint64(buf[43:], uint64(b.ProducerID))
	be.PutUint16(buf[51:], uint16(b.ProducerEpoch))
	be.PutUint32(buf[53:], uint32(b.BaseSequence))
	be.PutUint32(buf[57:], uint32(len(b.Records)))
	buf = append(buf, payload...)
	crc := crc32.Checksum(buf[21:], castagnoli) // covers attributes .. end of batch
	be.PutUint32(buf[17:], crc)
	return Encoded{buf, attrs, lastDelta, baseTs, maxTs, crc, records, len(payload)}
}

// marker builds a transaction marker (control batch) as a broker writes it: one control record with key
// (version 0, type) and value (version 0, coordinator epoch), no sequence.
func marker(commit bool, pid int64, epoch int16, offset int64, ts int64, coordinatorEpoch int32, leaderEpoch int32) *Batch {
	typeID := int16(0)
	name := "abort"
	if commit {
		typeID, name = 1, "commit"
	}
	key := make([]byte, 4)
	binary.BigEndian.PutUint16(key[2:], uint16(typeID))
	value := make([]byte, 6)
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	return &Batch{
		BaseOffset: offset, LeaderEpoch: leaderEpoch, Comp: none(), Transactional: true, Control: true,
		ProducerID: pid, ProducerEpoch: epoch, BaseSequence: -1,
		Records: []Rec{{OffsetDelta: 0, Timestamp: ts, Key: raw(key), Value: raw(value)}},
		Marker:  &ControlInfo{Type: name, TypeID: typeID, KeyVersion: 0, MarkerVersion: 0, CoordinatorEpoch: coordinatorEpoch},
	}
}

// ------------------------------------------------------------------------------------- compressors

func none() Compressor { return Compressor{Codec: codecNone, Describe: "none"} }

// gzip as franz-go writes it: gzip.NewWriterLevel(buf, gzip.DefaultCompression), Write, Close.
func gzipDefault() Compressor {
	return Compressor{Codec: codecGzip, Describe: "compress/gzip NewWriterLevel(buf, gzip.DefaultCompression); Write; Close", Fn: func(src []byte) []byte {
		var buf bytes.Buffer
		w, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
		check(err)
		_, err = w.Write(src)
		check(err)
		check(w.Close())
		return buf.Bytes()
	}}
}

// snappy as franz-go writes it: one raw snappy block from s2.EncodeSnappy (no xerial framing).
func snappyS2Raw() Compressor {
	return Compressor{Codec: codecSnappy, Describe: "klauspost/compress/s2 EncodeSnappy(nil, src): one raw snappy block", Fn: func(src []byte) []byte {
		return s2.EncodeSnappy(nil, src)
	}}
}

// snappy as Sarama writes it: eapache/go-xerial-snappy Encode, which in this version is golang/snappy's
// raw block encoder (no framing).
func snappyEapacheRaw() Compressor {
	return Compressor{Codec: codecSnappy, Describe: "eapache/go-xerial-snappy Encode(src) (= golang/snappy Encode(nil, src)): one raw snappy block", Fn: func(src []byte) []byte {
		return xsnappy.Encode(src)
	}}
}

// xerial framing from eapache/go-xerial-snappy EncodeStream: magic, version 1, compat 1, then
// big-endian length-prefixed raw snappy chunks of 32 KiB of input each.
func snappyEapacheXerial() Compressor {
	return Compressor{Codec: codecSnappy, Describe: "eapache/go-xerial-snappy EncodeStream(nil, src): xerial framing, 32 KiB chunks (golang/snappy)", Fn: func(src []byte) []byte {
		return xsnappy.EncodeStream(nil, src)
	}}
}

// xerial framing (franz-go's layout) of the whole records section in one Write: 32 KiB chunks, each
// s2.EncodeSnappy (see xerialWriter).
func snappyS2Xerial() Compressor {
	return Compressor{Codec: codecSnappy, Describe: "xerial framing (this program: magic, version 1, compat 1, BE int32 chunk lengths) of 32 KiB chunks, each klauspost/compress/s2 EncodeSnappy", Fn: func(src []byte) []byte {
		var buf bytes.Buffer
		_, err := (&xerialWriter{dst: &buf}).Write(src)
		check(err)
		return buf.Bytes()
	}}
}

// lz4 through pierrec/lz4 (v2.5 API: settings in Writer.Header), Write, Flush, Close.
func lz4Writer(describe string, header func(src []byte) lz4.Header) Compressor {
	return Compressor{Codec: codecLz4, Describe: describe, Fn: func(src []byte) []byte {
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		w.Header = header(src)
		_, err := w.Write(src)
		check(err)
		check(w.Flush())
		check(w.Close())
		return buf.Bytes()
	}}
}

func lz4Default() Compressor {
	return lz4Writer("pierrec/lz4 v2.5 NewWriter(buf) defaults (4 MiB blocks, independent, content checksum, no block checksum); Write; Flush; Close", func([]byte) lz4.Header { return lz4.Header{} })
}

// franz-go's zstd encoder: zstd.NewWriter(nil, WithWindowSize(64<<10), WithEncoderConcurrency(1),
// WithZeroFrames(true)).
func zstdEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
	check(err)
	return enc
}

const zstdOptions = "zstd.NewWriter(nil, zstd.WithWindowSize(64<<10), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))"

func zstdEncodeAll() Compressor {
	enc := zstdEncoder()
	return Compressor{Codec: codecZstd, Describe: "klauspost/compress/zstd " + zstdOptions + "; EncodeAll(src, nil)", Fn: func(src []byte) []byte {
		return enc.EncodeAll(src, nil)
	}}
}

// The streaming path: the same encoder as an io.Writer, Flush after every 32 KiB of input, then Close:
// one frame without a content size, one block per Flush and an empty last block.
func zstdStreamFlush() Compressor {
	return Compressor{Codec: codecZstd, Describe: "klauspost/compress/zstd " + zstdOptions + "; Reset(buf); Write 32 KiB + Flush, repeated; Close", Fn: func(src []byte) []byte {
		var buf bytes.Buffer
		enc := zstdEncoder()
		enc.Reset(&buf)
		for pos := 0; pos < len(src); pos += 32 << 10 {
			end := pos + 32<<10
			if end > len(src) {
				end = len(src)
			}
			_, err := enc.Write(src[pos:end])
			check(err)
			check(enc.Flush())
		}
		check(enc.Close())
		return buf.Bytes()
	}}
}

// ------------------------------------------------------------------------------- the streaming path

// streamer is a compressor used as an io.Writer that can flush mid-stream (gzip, lz4, zstd, xerial).
type streamer interface {
	io.Writer
	Flush() error
	Close() error
}

// streamRecords drives w the way a streaming producer does (the pattern of franz-go's streaming
// compressor in pkg/kgo/compression.go, read for its behaviour, not copied): encoded records collect in a
// buffer that is handed to Write once it holds at least 32 KiB (so a Write holds whole records and may
// exceed 32 KiB); at a flush point (a producer measuring the compressed size so far; here every
// flushEvery records) the buffer is written and the codec flushed; at the end the rest is written and the
// codec closed.  This loop is this program's own simulation of that pattern.
func streamRecords(w streamer, recs [][]byte, flushEvery int) {
	var buf []byte
	write := func() {
		if len(buf) > 0 {
			_, err := w.Write(buf)
			check(err)
			buf = buf[:0]
		}
	}
	for i, r := range recs {
		buf = append(buf, r...)
		if len(buf) >= 32<<10 {
			write()
		}
		if (i+1)%flushEvery == 0 {
			write()
			check(w.Flush())
		}
	}
	write()
	check(w.Close())
}

// xerialWriter frames snappy as Java's producer does: the xerial header before the first block, then for
// every Write its bytes in blocks of at most 32 KiB, each a big-endian length and an s2.EncodeSnappy block.
// Blocks are independent, so Flush and Close have nothing to do.
type xerialWriter struct {
	dst     *bytes.Buffer
	started bool
}

func (w *xerialWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.dst.Write([]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1})
		w.started = true
	}
	for rest := p; len(rest) > 0; {
		n := len(rest)
		if n > 32<<10 {
			n = 32 << 10
		}
		block := s2.EncodeSnappy(nil, rest[:n])
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], uint32(len(block)))
		w.dst.Write(size[:])
		w.dst.Write(block)
		rest = rest[n:]
	}
	return len(p), nil
}

func (w *xerialWriter) Flush() error { return nil }
func (w *xerialWriter) Close() error { return nil }

const streamDescribe = "; records streamed: Write when >= 32 KiB are buffered, Write + Flush every %d records, Write + Close at the end"

func streamed(codec int, describe string, flushEvery int, open func(*bytes.Buffer) streamer) Compressor {
	return Compressor{Codec: codec, Describe: describe + fmt.Sprintf(streamDescribe, flushEvery), Stream: func(recs [][]byte) []byte {
		var buf bytes.Buffer
		streamRecords(open(&buf), recs, flushEvery)
		return buf.Bytes()
	}}
}

func gzipStream(flushEvery int) Compressor {
	return streamed(codecGzip, "compress/gzip NewWriterLevel(buf, gzip.DefaultCompression)", flushEvery, func(buf *bytes.Buffer) streamer {
		w, err := gzip.NewWriterLevel(buf, gzip.DefaultCompression)
		check(err)
		return w
	})
}

func lz4Stream(flushEvery int) Compressor {
	return streamed(codecLz4, "pierrec/lz4 v2.5 NewWriter(buf) defaults", flushEvery, func(buf *bytes.Buffer) streamer {
		return lz4.NewWriter(buf)
	})
}

func zstdStream(flushEvery int) Compressor {
	return streamed(codecZstd, "klauspost/compress/zstd "+zstdOptions+"; Reset(buf)", flushEvery, func(buf *bytes.Buffer) streamer {
		enc := zstdEncoder()
		enc.Reset(buf)
		return enc
	})
}

func xerialStream(flushEvery int) Compressor {
	return streamed(codecSnappy, "xerial framing written by this program, blocks of at most 32 KiB per Write, each klauspost/compress/s2 EncodeSnappy", flushEvery, func(buf *bytes.Buffer) streamer {
		return &xerialWriter{dst: buf}
	})
}

// ---------------------------------------------------------------------------------- record content

// splitmix64: a fixed, documented generator, so the vectors never depend on a library's random numbers.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func (r *rng) bytes(n int) []byte {
	out := make([]byte, n)
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.next())
		copy(out[i:], w[:])
	}
	return out
}

var words = strings.Fields("kafka record batch offset producer epoch sequence transaction commit abort " +
	"marker partition leader replica segment index snapshot consumer fetch compress zstd lz4 snappy gzip " +
	"franz go client broker topic header value key timestamp window frame block checksum stream flush")

// text returns n bytes of word salad from r (compressible, but not trivially).
func (r *rng) text(n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteString(words[r.next()%uint64(len(words))])
		sb.WriteByte(' ')
	}
	return sb.String()[:n]
}

const t0 = int64(1718000000000) // 2024-06-10T06:13:20Z, the base of every timestamp here

// variety: ten records covering the shapes a client produces: null and empty keys, null (tombstone) and
// empty values, headers (empty and null values, a repeated name, a non-ASCII name), binary and non-UTF-8
// bytes, non-ASCII UTF-8, a timestamp before the first one (negative delta) and one a day later (max).
func variety(tag string, ts int64) []Rec {
	filler := func(s string) Payload { return rep(s+" "+tag+" go vector; ", 6) }
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(255 - i)
	}
	ascending := make([]byte, 256)
	for i := range ascending {
		ascending[i] = byte(i)
	}
	rs := []Rec{
		{Timestamp: ts, Key: str("key-0"), Value: filler("first value")},
		{Timestamp: ts + 1, Key: null(), Value: filler("no key")},
		{Timestamp: ts + 2, Key: str("key-empty-value"), Value: str("")},
		{Timestamp: ts + 3, Key: str("key-tombstone"), Value: null()},
		{Timestamp: ts - 5000, Key: str(""), Value: filler("empty key, earlier timestamp")},
		{Timestamp: ts + 4, Key: str("key-headers"), Value: filler("with headers"), Headers: []Header{
			{"trace-id", str("0af7651916cd43dd8448eb211c80319c")},
			{"empty", str("")},
			{"null", null()},
			{"dup", str("1")},
			{"dup", str("2")},
			{"clé-ключ-キー", str("ü")},
			{"", str("empty name")},
		}},
		{Timestamp: ts + 5, Key: raw(all), Value: repB(ascending, 4)},
		{Timestamp: ts + 6, Key: str("ключ-🔑-鍵"), Value: str("Grüße, 世界, مرحبا, 🎉 — " + tag)},
		{Timestamp: ts + 7, Key: raw([]byte{0xc3, 0x28, 0xff, 0x00, 'k'}), Value: raw([]byte("caf\xe9 na\xefve \x80\x81 \x00 end"))},
		{Timestamp: ts + 86400000, Key: str("key-last"), Value: filler("a day later, the max timestamp")},
	}
	for i := range rs {
		rs[i].OffsetDelta = int32(i)
	}
	return rs
}

// bulk: n records of about size bytes each; each value is a distinct chunk of word salad repeated.
func bulk(seed uint64, n int, unit int, times int, ts int64) []Rec {
	r := &rng{seed}
	rs := make([]Rec, n)
	for i := range rs {
		rs[i] = Rec{
			OffsetDelta: int32(i),
			Timestamp:   ts + int64(i%17),
			Key:         str(fmt.Sprintf("bulk-%06d", i)),
			Value:       rep(fmt.Sprintf("#%d %s|", i, r.text(unit)), times),
		}
	}
	return rs
}

// noise: n records of incompressible bytes (size each).
func noise(seed uint64, n int, size int, ts int64) []Rec {
	r := &rng{seed}
	rs := make([]Rec, n)
	for i := range rs {
		rs[i] = Rec{OffsetDelta: int32(i), Timestamp: ts + int64(i), Key: str(fmt.Sprintf("noise-%d", i)), Value: raw(r.bytes(size))}
	}
	return rs
}

// take returns records i..j-1 of rs renumbered from offset delta 0 (a new batch of its own).
func take(rs []Rec, i, j int) []Rec {
	out := append([]Rec(nil), rs[i:j]...)
	return shift(out, -out[0].OffsetDelta)
}

func shift(rs []Rec, delta int32) []Rec {
	for i := range rs {
		rs[i].OffsetDelta += delta
	}
	return rs
}

func plain(offset int64, comp Compressor, rs []Rec) *Batch {
	return &Batch{BaseOffset: offset, LeaderEpoch: -1, Comp: comp, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: rs}
}

func i32p(v int32) *int32 { return &v }

// ------------------------------------------------------------------------------------------- cases

func cases() []Case {
	var cs []Case
	add := func(name, desc string, bs ...*Batch) { cs = append(cs, Case{name, desc, bs}) }

	add("none_basic", "uncompressed batch of the ten-record variety set (producer-written: base offset 0, leader epoch -1, no producer id)",
		plain(0, none(), variety("none", t0+1000)))
	add("gzip_basic", "gzip (compress/gzip, DefaultCompression) of the variety set",
		plain(0, gzipDefault(), variety("gzip", t0+2000)))
	add("snappy_raw_s2", "snappy as franz-go writes it: one raw block from s2.EncodeSnappy",
		plain(0, snappyS2Raw(), variety("snappy-s2", t0+3000)))
	add("snappy_raw_golang", "snappy as Sarama writes it: one raw block from eapache/go-xerial-snappy Encode (golang/snappy)",
		plain(0, snappyEapacheRaw(), variety("snappy-golang", t0+4000)))
	add("snappy_raw_s2_bulk", "one raw s2.EncodeSnappy block of ~330 KiB of records (larger than any xerial chunk or 64 KiB snappy fragment)",
		plain(0, snappyS2Raw(), bulk(11, 80, 280, 15, t0+5000)))
	add("snappy_xerial_eapache", "xerial-framed snappy from eapache/go-xerial-snappy EncodeStream: several 32 KiB chunks",
		plain(0, snappyEapacheXerial(), append(variety("xerial-eapache", t0+6000), shift(bulk(12, 40, 300, 12, t0+6000), 10)...)))
	add("snappy_xerial_s2", "xerial framing with 32 KiB chunks, each chunk s2.EncodeSnappy (franz-go's streaming layout)",
		plain(0, snappyS2Xerial(), append(variety("xerial-s2", t0+7000), shift(bulk(13, 40, 300, 12, t0+7000), 10)...)))
	add("lz4_default", "lz4 frame from pierrec/lz4 NewWriter defaults: 4 MiB block size, content checksum, one block",
		plain(0, lz4Default(), variety("lz4", t0+8000)))
	add("lz4_block_checksum_64k", "lz4 frame with block checksums, content checksum and 64 KiB blocks: several blocks",
		plain(0, lz4Writer("pierrec/lz4 v2.5 NewWriter(buf) with Header{BlockChecksum: true, BlockMaxSize: 64 << 10} (content checksum on, the default); Write; Flush; Close",
			func([]byte) lz4.Header { return lz4.Header{BlockChecksum: true, BlockMaxSize: 64 << 10} }), append(variety("lz4-64k", t0+9000), shift(bulk(14, 60, 300, 14, t0+9000), 10)...)))
	add("lz4_content_size", "lz4 frame with the optional content size in its header (Header.Size) and no content checksum",
		plain(0, lz4Writer("pierrec/lz4 v2.5 NewWriter(buf) with Header{Size: len(src), NoChecksum: true}; Write; Flush; Close (content size set by this program)",
			func(src []byte) lz4.Header { return lz4.Header{Size: uint64(len(src)), NoChecksum: true} }), variety("lz4-size", t0+10000)))
	add("lz4_incompressible", "lz4 frame whose only block is stored uncompressed (block size high bit set): random record values",
		plain(0, lz4Default(), noise(15, 4, 1500, t0+11000)))
	add("zstd_encodeall_small", "zstd EncodeAll (franz-go's path) of the variety set: one frame with content size and checksum",
		plain(0, zstdEncodeAll(), variety("zstd", t0+12000)))
	add("zstd_encodeall_1mib", "zstd EncodeAll of ~1.1 MiB of records with a 64 KiB window: frame larger than its window, many blocks",
		plain(0, zstdEncodeAll(), bulk(16, 256, 300, 14, t0+13000)))
	add("zstd_stream_flush", "zstd streaming Write/Flush every 32 KiB/Close: no content size, one block per Flush, empty last block; includes a long run of zeros",
		plain(0, zstdStreamFlush(), append(append(variety("zstd-stream", t0+14000), shift(bulk(17, 30, 300, 12, t0+14000), 10)...),
			Rec{OffsetDelta: 40, Timestamp: t0 + 14040, Key: str("zeros"), Value: repB([]byte{0}, 100000)})))
	add("zstd_encodeall_under_1k", "zstd EncodeAll of 256..1024 bytes of records: not single-segment (klauspost uses single segments only above 1 KiB), 1 KiB window, two-byte content size (stored minus 256)",
		plain(0, zstdEncodeAll(), take(variety("zstd-1k", t0+15500), 0, 4)))
	add("zstd_incompressible", "zstd EncodeAll of random record values: a raw (stored) block",
		plain(0, zstdEncodeAll(), noise(18, 4, 1500, t0+15000)))

	// the streaming path: records handed to the codec as a streaming producer does, with flushes
	streamRecs := func(tag string, seed uint64, ts int64) []Rec {
		return append(variety(tag, ts), shift(bulk(seed, 50, 300, 12, ts), 10)...)
	}
	add("gzip_stream", "gzip written record by record with Flush every 20 records: a deflate stream with sync-flush points (empty stored blocks)",
		plain(0, gzipStream(20), streamRecs("gzip-stream", 21, t0+30000)))
	add("lz4_stream", "lz4 (pierrec/lz4 defaults) written record by record with Flush every 20 records: a 4 MiB-block frame with one block per Flush, each far below the block size",
		plain(0, lz4Stream(20), streamRecs("lz4-stream", 22, t0+31000)))
	add("zstd_stream_records", "zstd (franz-go's encoder settings) written record by record with Flush every 20 records: no content size, blocks of uneven size, empty last block",
		plain(0, zstdStream(20), streamRecs("zstd-stream-records", 23, t0+32000)))
	add("snappy_xerial_stream", "xerial snappy written record by record (s2 blocks of at most 32 KiB per Write): chunks of uneven size, none crossing a Write",
		plain(0, xerialStream(20), streamRecs("xerial-stream", 24, t0+33000)))

	// idempotent producer: one producer id and epoch, sequences running on over three batches, each at the
	// base offset a broker assigns (the file is a partition's log)
	pid, epoch := int64(4242), int16(3)
	idem := func(off int64, seq int32, comp Compressor, rs []Rec) *Batch {
		b := plain(off, comp, rs)
		b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.LeaderEpoch = pid, epoch, seq, 5
		return b
	}
	add("idempotent", "idempotent producer: producer id 4242, epoch 3, base sequences 0, 10, 15 over three batches (zstd, none, lz4) at broker-assigned offsets",
		idem(0, 0, zstdEncodeAll(), variety("idem", t0+16000)),
		idem(10, 10, none(), take(variety("idem-2", t0+17000), 0, 5)),
		idem(15, 15, lz4Default(), take(variety("idem-3", t0+18000), 0, 1)))
	wrap := plain(700, snappyS2Raw(), take(variety("wrap", t0+19000), 0, 6))
	wrap.ProducerID, wrap.ProducerEpoch, wrap.BaseSequence, wrap.LeaderEpoch = 99, 0, 2147483645, 2
	add("idempotent_sequence_wrap", "idempotent batch whose sequences wrap: base sequence 2147483645, six records, record sequences ..., 2147483647, 0, 1, 2",
		wrap)

	// transactions: producer 5001 commits, producer 5002 aborts, interleaved, with the markers a broker writes
	txn := func(off int64, p int64, e int16, seq int32, comp Compressor, rs []Rec) *Batch {
		b := plain(off, comp, rs)
		b.ProducerID, b.ProducerEpoch, b.BaseSequence, b.Transactional, b.LeaderEpoch = p, e, seq, true, 9
		return b
	}
	add("transactional", "two transactional producers interleaved: 5001 commits (offsets 0-2), 5002 aborts (3-4, 6-7), 5001 commits again (9-11, zstd); COMMIT at 5 and 12, ABORT at 8 (control batches: key version 0 + type, value version 0 + coordinator epoch)",
		txn(0, 5001, 1, 0, none(), take(variety("txn-a", t0+20000), 0, 3)),
		txn(3, 5002, 7, 0, lz4Default(), take(variety("txn-b", t0+20010), 3, 5)),
		marker(true, 5001, 1, 5, t0+20100, 11, 9),
		txn(6, 5002, 7, 2, gzipDefault(), take(variety("txn-b2", t0+20200), 5, 7)),
		marker(false, 5002, 7, 8, t0+20300, 11, 9),
		txn(9, 5001, 1, 3, zstdEncodeAll(), take(variety("txn-a2", t0+20400), 7, 10)),
		marker(true, 5001, 1, 12, t0+20500, 12, 9))

	// log append time: the broker stamps maxTimestamp and sets attribute bit 3; records read as that time
	lat1 := plain(500, none(), take(variety("lat", t0+21000), 0, 4))
	lat1.LogAppendTime, lat1.LeaderEpoch = t0+999999, 12
	lat2 := plain(504, snappyS2Raw(), take(variety("lat-2", t0+22000), 4, 8))
	lat2.LogAppendTime, lat2.LeaderEpoch = t0+1000123, 12
	add("log_append_time", "LogAppendTime batches (attribute bit 3, maxTimestamp = broker time, every record reads as it) at base offsets 500 and 504, leader epoch 12, uncompressed and snappy",
		lat1, lat2)

	// compacted: offset deltas with gaps, the first one non-zero, lastOffsetDelta past the last record
	g1 := plain(1000000, none(), []Rec{
		{OffsetDelta: 3, Timestamp: t0 + 23000, Key: str("k3"), Value: str("v3")},
		{OffsetDelta: 4, Timestamp: t0 + 23004, Key: str("k4"), Value: null()},
		{OffsetDelta: 7, Timestamp: t0 + 23007, Key: str("k7"), Value: str("v7"), Headers: []Header{{"h", str("x")}}},
		{OffsetDelta: 10, Timestamp: t0 + 23010, Key: str("k10"), Value: str("v10")},
	})
	g1.LastOffsetDelta = i32p(12)
	g1.ProducerID, g1.ProducerEpoch, g1.BaseSequence, g1.LeaderEpoch = 77, 0, 100, 4
	g2 := plain(1000013, zstdEncodeAll(), []Rec{
		{OffsetDelta: 0, Timestamp: t0 + 23100, Key: str("k13"), Value: str("v13")},
		{OffsetDelta: 5, Timestamp: t0 + 23105, Key: str("k18"), Value: str("v18")},
	})
	g2.LastOffsetDelta = i32p(9)
	g2.ProducerID, g2.ProducerEpoch, g2.BaseSequence, g2.LeaderEpoch = 77, 0, 113, 4
	add("offset_gaps", "compacted batches at base offset 1000000: record offset deltas 3, 4, 7, 10 (lastOffsetDelta 12) then 0, 5 (lastOffsetDelta 9, zstd); record sequences follow the offset deltas",
		g1, g2)

	add("one_record_zstd", "a batch of one record, zstd EncodeAll: under 256 bytes, so klauspost writes a frame with no content size, a 1 KiB window and one raw block",
		plain(0, zstdEncodeAll(), []Rec{{Timestamp: t0 + 24000, Key: str("only"), Value: str("the one record")}}))
	many := make([]Rec, 5000)
	for i := range many {
		many[i] = Rec{OffsetDelta: int32(i), Timestamp: t0 + 25000 + int64(i/10), Key: str(fmt.Sprintf("k%d", i)), Value: str(fmt.Sprintf("value %d of many", i))}
	}
	add("many_records_lz4", "5,000 small records in one lz4 batch (pierrec/lz4 defaults)",
		plain(0, lz4Default(), many))
	return cs
}

// ------------------------------------------------------------------------------------------ sidecar

func payloadJSON(p Payload) interface{} {
	if p.Null {
		return nil
	}
	m := map[string]interface{}{}
	if utf8.Valid(p.Unit) {
		m["utf8"] = string(p.Unit)
	} else {
		m["b64"] = base64.StdEncoding.EncodeToString(p.Unit)
	}
	if p.Times != 1 {
		m["times"] = p.Times
	}
	return m
}

type batchJSON struct {
	Position             int          `json:"position"`
	Size                 int          `json:"size"`
	BaseOffset           int64        `json:"base_offset"`
	BatchLength          int          `json:"batch_length"`
	PartitionLeaderEpoch int32        `json:"partition_leader_epoch"`
	Magic                int          `json:"magic"`
	CRC                  uint32       `json:"crc"`
	Attributes           int16        `json:"attributes"`
	Compression          string       `json:"compression"`
	TimestampType        string       `json:"timestamp_type"`
	IsTransactional      bool         `json:"is_transactional"`
	IsControl            bool         `json:"is_control"`
	LastOffsetDelta      int32        `json:"last_offset_delta"`
	LastOffset           int64        `json:"last_offset"`
	BaseTimestamp        int64        `json:"base_timestamp"`
	MaxTimestamp         int64        `json:"max_timestamp"`
	ProducerID           int64        `json:"producer_id"`
	ProducerEpoch        int16        `json:"producer_epoch"`
	BaseSequence         int32        `json:"base_sequence"`
	LastSequence         int32        `json:"last_sequence"`
	RecordsCount         int          `json:"records_count"`
	FirstRecord          int          `json:"first_record"`
	PayloadSize          int          `json:"payload_size"`
	UncompressedSize     int          `json:"uncompressed_size"`
	UncompressedSHA256   string       `json:"uncompressed_sha256"`
	Compressor           string       `json:"compressor"`
	Control              *ControlInfo `json:"control,omitempty"`
}

type recordJSON struct {
	Batch          int             `json:"batch"`
	Offset         int64           `json:"offset"`
	OffsetDelta    int32           `json:"offset_delta"`
	Timestamp      int64           `json:"timestamp"`
	TimestampDelta int64           `json:"timestamp_delta"`
	Sequence       int32           `json:"sequence"`
	Control        bool            `json:"control"`
	ReadCommitted  bool            `json:"read_committed"`
	Key            interface{}     `json:"key"`
	Value          interface{}     `json:"value"`
	Headers        [][]interface{} `json:"headers"`
}

type sidecar struct {
	Name                string `json:"name"`
	Description         string `json:"description"`
	Generator           string `json:"generator"`
	GoVersion           string `json:"go_version"`
	GoPackages          string `json:"go_packages"`
	LogEndOffset        int64  `json:"log_end_offset"`
	LastStableOffset    int64  `json:"last_stable_offset"`
	AbortedTransactions string `json:"aborted_transactions"`
	Batches             string `json:"batches"`
	Records             string `json:"records"`
}

func marshal(v interface{}, indent bool) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", " ")
	}
	check(enc.Encode(v))
	return strings.TrimRight(buf.String(), "\n")
}

func lines(items []string) string {
	if len(items) == 0 {
		return "[]"
	}
	return "[\n  " + strings.Join(items, ",\n  ") + "\n ]"
}

// the Debian packages whose sources are compiled in (cespare/xxhash: Debian's klauspost/compress uses it
// in place of its vendored copy)
var debPackages = []string{"golang-go", "golang-1.19-go", "golang-github-klauspost-compress-dev",
	"golang-github-pierrec-lz4-dev", "golang-github-eapache-go-xerial-snappy-dev", "golang-github-golang-snappy-dev",
	"golang-github-cespare-xxhash-dev"}

func packageVersions() []map[string]string {
	var out []map[string]string
	for _, p := range debPackages {
		v := "unknown"
		if b, err := exec.Command("dpkg-query", "-W", "-f=${Version}", p).Output(); err == nil && len(b) > 0 {
			v = string(b)
		}
		out = append(out, map[string]string{"package": p, "version": v})
	}
	return out
}

// write encodes a case, checks the log is consistent, and writes CASE.bin and CASE.json.
func write(dir string, c Case, pkgs []map[string]string) (int, error) {
	var blob []byte
	var batches, records []string
	type openTxn struct {
		first   int64
		records []int // indexes into recs
	}
	open := map[int64]*openTxn{}
	var recs []*recordJSON
	var aborted [][2]int64
	next := int64(-1)
	for bi, b := range c.Batches {
		if b.BaseOffset < next {
			return 0, fmt.Errorf("%s: batch %d at offset %d overlaps the previous one (next %d)", c.Name, bi, b.BaseOffset, next)
		}
		e := b.encode()
		lastSeq := int32(-1)
		if b.BaseSequence >= 0 {
			lastSeq = incrementSequence(b.BaseSequence, e.LastOffsetDelta)
		}
		tsType := "create_time"
		if b.LogAppendTime > 0 {
			tsType = "log_append_time"
		}
		sum := sha256.Sum256(e.Uncompressed)
		bj := batchJSON{
			Position: len(blob), Size: len(e.Bytes), BaseOffset: b.BaseOffset, BatchLength: len(e.Bytes) - 12,
			PartitionLeaderEpoch: b.LeaderEpoch, Magic: 2, CRC: e.CRC, Attributes: e.Attributes,
			Compression: codecNames[b.Comp.Codec], TimestampType: tsType, IsTransactional: b.Transactional,
			IsControl: b.Control, LastOffsetDelta: e.LastOffsetDelta, LastOffset: b.BaseOffset + int64(e.LastOffsetDelta),
			BaseTimestamp: e.BaseTimestamp, MaxTimestamp: e.MaxTimestamp, ProducerID: b.ProducerID,
			ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence, LastSequence: lastSeq,
			RecordsCount: len(b.Records), FirstRecord: len(recs), PayloadSize: e.PayloadSize,
			UncompressedSize: len(e.Uncompressed), UncompressedSHA256: hex.EncodeToString(sum[:]),
			Compressor: b.Comp.Describe, Control: b.Marker,
		}
		batches = append(batches, marshal(bj, false))
		blob = append(blob, e.Bytes...)
		next = bj.LastOffset + 1
		for _, r := range b.Records {
			ts := r.Timestamp
			if b.LogAppendTime > 0 {
				ts = b.LogAppendTime
			}
			seq := int32(-1)
			if b.BaseSequence >= 0 {
				seq = incrementSequence(b.BaseSequence, r.OffsetDelta)
			}
			hs := [][]interface{}{}
			for _, h := range r.Headers {
				hs = append(hs, []interface{}{h.Key, payloadJSON(h.Value)})
			}
			rj := &recordJSON{Batch: bi, Offset: b.BaseOffset + int64(r.OffsetDelta), OffsetDelta: r.OffsetDelta,
				Timestamp: ts, TimestampDelta: r.Timestamp - e.BaseTimestamp, Sequence: seq, Control: b.Control,
				ReadCommitted: !b.Control, Key: payloadJSON(r.Key), Value: payloadJSON(r.Value), Headers: hs}
			if b.Transactional && !b.Control {
				t := open[b.ProducerID]
				if t == nil {
					t = &openTxn{first: b.BaseOffset} // a transaction's first offset is its first batch's base offset
					open[b.ProducerID] = t
				}
				t.records = append(t.records, len(recs))
			}
			recs = append(recs, rj)
		}
		if b.Control {
			if t := open[b.ProducerID]; t != nil {
				if b.Marker.TypeID == 0 { // ABORT: the transaction's records are hidden from read_committed
					aborted = append(aborted, [2]int64{b.ProducerID, t.first})
					for _, i := range t.records {
						recs[i].ReadCommitted = false
					}
				}
				delete(open, b.ProducerID)
			}
		}
	}
	lso := next
	for _, t := range open {
		if t.first < lso {
			lso = t.first
		}
	}
	for _, r := range recs {
		records = append(records, marshal(r, false))
	}
	if aborted == nil {
		aborted = [][2]int64{}
	}
	side := sidecar{
		Name: c.Name, Description: c.Description, Generator: "scripts/go_vectors/main.go", GoVersion: runtime.Version(),
		GoPackages: "@packages", LogEndOffset: next, LastStableOffset: lso, AbortedTransactions: "@aborted",
		Batches: "@batches", Records: "@records",
	}
	text := marshal(side, true)
	text = strings.Replace(text, `"@packages"`, marshal(pkgs, false), 1)
	text = strings.Replace(text, `"@aborted"`, marshal(aborted, false), 1)
	text = strings.Replace(text, `"@batches"`, lines(batches), 1)
	text = strings.Replace(text, `"@records"`, lines(records), 1)
	if err := os.WriteFile(filepath.Join(dir, c.Name+".bin"), blob, 0o644); err != nil {
		return 0, err
	}
	return len(blob), os.WriteFile(filepath.Join(dir, c.Name+".json"), []byte(text+"\n"), 0o644)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}

func main() {
	out := flag.String("out", filepath.Join("tests", "vectors", "go"), "directory to write CASE.bin and CASE.json into")
	flag.Parse()
	check(os.MkdirAll(*out, 0o755))
	pkgs := packageVersions()
	total := 0
	all := cases()
	for _, c := range all {
		n, err := write(*out, c, pkgs)
		check(err)
		total += n
		fmt.Printf("%-26s %2d batches %8d bytes\n", c.Name, len(c.Batches), n)
	}
	fmt.Printf("%d cases, %d bytes of batches, %s\n", len(all), total, runtime.Version())
}
