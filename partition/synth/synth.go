// Package synth generates deterministic synthetic columnar batches for
// tests, benchmarks and the load generator: a TPC-H lineitem-like table and
// a few simpler schemas.
//
// The main invariant: Generate is a pure function of its arguments; the
// same schema, seed, row count and options give the same bytes on every
// run and platform (the generator uses its own random number generator and
// samplers, never math/rand's). Column 0 of every schema is its key column,
// the one a load generator hashes to partition the rows.
package synth

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/partition"
)

// ErrUnknownSchema is returned for a schema name not in Schemas.
var ErrUnknownSchema = errdefs.New(errdefs.ErrInvalidArgument, "synth: unknown schema")

// Schemas lists the names Generate accepts.
var Schemas = []string{"lineitem", "ints", "strings", "wide", "types"}

type config struct {
	nulls float64
	skew  float64
}

// Option configures Generate.
type Option func(*config) error

// WithNulls makes each value of every column but the key column null with
// probability frac, in [0, 1). The default is no nulls (no validity
// bitmaps at all).
func WithNulls(frac float64) Option {
	return func(c *config) error {
		if !(frac >= 0 && frac < 1) {
			return fmt.Errorf("synth: null fraction %v, want [0, 1)", frac)
		}
		c.nulls = frac
		return nil
	}
}

// WithKeySkew draws the key column (column 0) from a Zipf distribution of
// exponent s > 1 over as many distinct values as rows, so that a few keys,
// and the partitions they hash to, hold most rows. s = 0, the default,
// keeps the schema's natural keys.
func WithKeySkew(s float64) Option {
	return func(c *config) error {
		if s != 0 && !(s > 1 && s <= 10) {
			return fmt.Errorf("synth: key skew %v, want 0 or (1, 10]", s)
		}
		c.skew = s
		return nil
	}
}

// Generate returns a batch of rows rows of the named schema (see Schemas),
// not partitioned (PartitionOffsets nil).
//
//   - lineitem: the 16 columns of TPC-H's lineitem, with dbgen's value
//     ranges: l_orderkey int64 (1 to 7 lines per order), l_partkey and
//     l_suppkey int64, l_linenumber int32, l_quantity, l_extendedprice,
//     l_discount and l_tax decimal64(15,2), l_returnflag and l_linestatus
//     one-letter strings, l_shipdate, l_commitdate and l_receiptdate date32,
//     l_shipinstruct and l_shipmode strings from small sets, l_comment
//     pseudo-English of 10 to 43 bytes.
//   - ints: key int64 and five int64/int32 columns of mixed entropy.
//   - strings: key int64 and five string columns (names, cities, comments,
//     numeric ids, codes).
//   - wide: key int64 and 39 columns cycling through the types of Spark's
//     common columns.
//   - types: key int64 and one column of each other type, in type-code
//     order: bool, int8, int16, int32, float32, float64, date32,
//     timestamp_us, decimal64(18,4), string, binary, decimal32(9,2) and
//     decimal128(38,10), the decimals of both signs up to their precision.
func Generate(schema string, seed int64, rows int, opts ...Option) (*partition.Batch, error) {
	var cfg config
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if rows < 0 || rows > partition.MaxRows {
		return nil, fmt.Errorf("synth: rows = %d, want 0 to %d", rows, partition.MaxRows)
	}
	g := &gen{r: newRNG(uint64(seed)), rows: rows, cfg: cfg}
	switch schema {
	case "lineitem":
		g.lineitem()
	case "ints":
		g.ints()
	case "strings":
		g.strings()
	case "wide":
		g.wide()
	case "types":
		g.types()
	default:
		return nil, fmt.Errorf("%w: %q (want one of %q)", ErrUnknownSchema, schema, Schemas)
	}
	if cfg.skew != 0 {
		g.skewKeys()
	}
	if cfg.nulls > 0 {
		g.addNulls()
	}
	return &partition.Batch{Columns: g.cols, Rows: rows}, nil
}

// gen accumulates the columns of one batch.
type gen struct {
	r    rng
	rows int
	cfg  config
	cols []partition.Column
}

func (g *gen) fixed(name string, t partition.Type) []byte {
	data := make([]byte, g.rows*t.Width())
	g.cols = append(g.cols, partition.Column{Name: name, Type: t, Data: data})
	return data
}

func (g *gen) decimal(name string, precision, scale int8) []byte {
	data := g.fixed(name, partition.Decimal64)
	c := &g.cols[len(g.cols)-1]
	c.Precision, c.Scale = precision, scale
	return data
}

// varCol builds a String column row by row.
type varCol struct {
	off  []int32
	data []byte
}

func newVarCol(rows, avg int) *varCol {
	v := &varCol{off: make([]int32, 1, rows+1), data: make([]byte, 0, rows*avg)}
	return v
}

func (v *varCol) end() { v.off = append(v.off, int32(len(v.data))) }

func (g *gen) addVar(name string, v *varCol) {
	g.cols = append(g.cols, partition.Column{Name: name, Type: partition.String, Offsets: v.off, Data: v.data})
}

// fromSet builds a String column whose every row is one of set, picked by
// pick(row).
func (g *gen) fromSet(name string, set []string, pick func(i int) int) {
	total := 0
	for _, s := range set {
		total += len(s)
	}
	v := newVarCol(g.rows, total/len(set)+1)
	for i := range g.rows {
		v.data = append(v.data, set[pick(i)]...)
		v.end()
	}
	g.addVar(name, v)
}

// Dates are days since 1970-01-01.
const (
	startDate   = 8035  // 1992-01-01
	endDate     = 10440 // 1998-08-02
	currentDate = 9298  // 1995-06-17
)

var (
	shipInstructs = []string{"DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN"}
	shipModes     = []string{"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"}
	flags         = []string{"R", "A", "N", "O", "F"}
)

func (g *gen) lineitem() {
	n := g.rows
	buf := func(t partition.Type) []byte { return make([]byte, n*t.Width()) }
	orderkey, partkey, suppkey := buf(partition.Int64), buf(partition.Int64), buf(partition.Int64)
	linenumber := buf(partition.Int32)
	quantity, price, discount, tax := buf(partition.Decimal64), buf(partition.Decimal64), buf(partition.Decimal64), buf(partition.Decimal64)
	shipdate, commitdate, receiptdate := buf(partition.Date32), buf(partition.Date32), buf(partition.Date32)
	returnflag, linestatus, instruct, mode := make([]uint8, n), make([]uint8, n), make([]uint8, n), make([]uint8, n)

	r := &g.r
	order, line, lines, orderdate := 0, 0, 0, 0
	for i := range n {
		if line == lines {
			order++
			line, lines = 0, 1+r.intn(7)
			orderdate = startDate + r.intn(endDate-151-startDate)
		}
		line++
		// dbgen's sparse order keys: 8 used out of every 32.
		ok := ((order-1)/8)*32 + (order-1)%8 + 1
		pk := 1 + r.intn(200000)
		// dbgen's retail price of a part, in cents.
		retail := 90000 + (pk/10)%20001 + 100*(pk%1000)
		q := 1 + r.intn(50)
		ship := orderdate + 1 + r.intn(121)
		receipt := ship + 1 + r.intn(30)
		binary.LittleEndian.PutUint64(orderkey[8*i:], uint64(ok))
		binary.LittleEndian.PutUint64(partkey[8*i:], uint64(pk))
		binary.LittleEndian.PutUint64(suppkey[8*i:], uint64(1+(pk+r.intn(4)*2501)%10000))
		binary.LittleEndian.PutUint32(linenumber[4*i:], uint32(line))
		binary.LittleEndian.PutUint64(quantity[8*i:], uint64(q*100))
		binary.LittleEndian.PutUint64(price[8*i:], uint64(q*retail))
		binary.LittleEndian.PutUint64(discount[8*i:], uint64(r.intn(11)))
		binary.LittleEndian.PutUint64(tax[8*i:], uint64(r.intn(9)))
		binary.LittleEndian.PutUint32(shipdate[4*i:], uint32(ship))
		binary.LittleEndian.PutUint32(commitdate[4*i:], uint32(orderdate+30+r.intn(61)))
		binary.LittleEndian.PutUint32(receiptdate[4*i:], uint32(receipt))
		if receipt > currentDate {
			returnflag[i] = 2 // N
		} else {
			returnflag[i] = uint8(r.intn(2)) // R or A
		}
		if ship > currentDate {
			linestatus[i] = 3 // O
		} else {
			linestatus[i] = 4 // F
		}
		instruct[i] = uint8(r.intn(len(shipInstructs)))
		mode[i] = uint8(r.intn(len(shipModes)))
	}
	add := func(name string, t partition.Type, data []byte) {
		c := partition.Column{Name: name, Type: t, Data: data}
		if t == partition.Decimal64 {
			c.Precision, c.Scale = 15, 2
		}
		g.cols = append(g.cols, c)
	}
	add("l_orderkey", partition.Int64, orderkey)
	add("l_partkey", partition.Int64, partkey)
	add("l_suppkey", partition.Int64, suppkey)
	add("l_linenumber", partition.Int32, linenumber)
	add("l_quantity", partition.Decimal64, quantity)
	add("l_extendedprice", partition.Decimal64, price)
	add("l_discount", partition.Decimal64, discount)
	add("l_tax", partition.Decimal64, tax)
	g.fromSet("l_returnflag", flags, func(i int) int { return int(returnflag[i]) })
	g.fromSet("l_linestatus", flags, func(i int) int { return int(linestatus[i]) })
	add("l_shipdate", partition.Date32, shipdate)
	add("l_commitdate", partition.Date32, commitdate)
	add("l_receiptdate", partition.Date32, receiptdate)
	g.fromSet("l_shipinstruct", shipInstructs, func(i int) int { return int(instruct[i]) })
	g.fromSet("l_shipmode", shipModes, func(i int) int { return int(mode[i]) })
	g.comments("l_comment", 10, 43)
}

// comments adds a String column of pseudo-English text of min to max bytes
// a row.
func (g *gen) comments(name string, min, max int) {
	v := newVarCol(g.rows, (min+max)/2)
	r := &g.r
	for range g.rows {
		target := min + r.intn(max-min+1)
		start := len(v.data)
		for len(v.data)-start < target {
			if len(v.data) > start {
				v.data = append(v.data, ' ')
			}
			v.data = append(v.data, words[r.intn(len(words))]...)
		}
		v.data = v.data[:start+target]
		v.end()
	}
	g.addVar(name, v)
}

func (g *gen) ints() {
	n := g.rows
	key := g.fixed("key", partition.Int64)
	seq := g.fixed("seq", partition.Int64)
	small := g.fixed("small", partition.Int32)
	wide := g.fixed("wide", partition.Int64)
	count := g.fixed("count", partition.Int32)
	ts := g.fixed("ts", partition.Int64)
	r := &g.r
	t := int64(1_700_000_000_000_000)
	for i := range n {
		binary.LittleEndian.PutUint64(key[8*i:], uint64(r.intn(max(n, 1))))
		binary.LittleEndian.PutUint64(seq[8*i:], uint64(i))
		binary.LittleEndian.PutUint32(small[4*i:], uint32(r.intn(100)))
		binary.LittleEndian.PutUint64(wide[8*i:], uint64(i)<<12|uint64(r.intn(4096)))
		binary.LittleEndian.PutUint32(count[4*i:], uint32(bits.Len64(r.next()|1)))
		t += int64(r.intn(1000))
		binary.LittleEndian.PutUint64(ts[8*i:], uint64(t))
	}
}

var (
	firstNames = []string{"Alice", "Bob", "Carol", "Dave", "Eve", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Niaj", "Olivia", "Peggy", "Rupert", "Sybil", "Trent", "Victor", "Walter", "Zoe"}
	cities     = []string{"Amsterdam", "Berlin", "Cairo", "Delhi", "Edinburgh", "Frankfurt", "Geneva", "Hanoi", "Istanbul", "Jakarta", "Kyoto", "Lagos", "Madrid", "Nairobi", "Oslo", "Paris", "Quito", "Rome", "Seoul", "Tunis", "Utrecht", "Vienna", "Warsaw", "Xian", "Yerevan", "Zurich"}
	codes      = []string{"AA", "AB", "BX", "CZ", "DE", "FR", "GB", "IT", "NL", "US"}
)

func (g *gen) strings() {
	n := g.rows
	key := g.fixed("key", partition.Int64)
	r := &g.r
	for i := range n {
		binary.LittleEndian.PutUint64(key[8*i:], uint64(r.intn(max(n, 1))))
	}
	names := newVarCol(n, 12)
	for range n {
		names.data = append(names.data, firstNames[r.intn(len(firstNames))]...)
		names.data = append(names.data, ' ', byte('A'+r.intn(26)), '.')
		names.end()
	}
	g.addVar("name", names)
	g.fromSet("city", cities, func(int) int { return r.intn(len(cities)) })
	g.comments("comment", 20, 80)
	ids := newVarCol(n, 12)
	for i := range n {
		ids.data = append(ids.data, "ORD-"...)
		ids.data = appendUint(ids.data, uint64(1_000_000+i*7+r.intn(7)))
		ids.end()
	}
	g.addVar("id", ids)
	g.fromSet("code", codes, func(int) int { return r.intn(len(codes)) })
}

var binaryTokens = [][]byte{
	{0xca, 0xfe, 0xba, 0xbe}, {0xde, 0xad, 0xbe, 0xef}, {0, 0, 0, 1}, {0xff, 0xff},
	{1, 2, 3, 4, 5, 6, 7, 8}, {0x89, 'P', 'N', 'G'}, {0x1f, 0x8b, 8, 0}, {0x7f, 'E', 'L', 'F'},
}

var wideTypes = []partition.Type{
	partition.Int64, partition.Int32, partition.Float64, partition.Decimal64,
	partition.Date32, partition.String, partition.Bool, partition.Int16,
	partition.Float32, partition.TimestampMicros, partition.Int8, partition.Binary,
}

func (g *gen) wide() {
	n := g.rows
	key := g.fixed("key", partition.Int64)
	r := &g.r
	for i := range n {
		binary.LittleEndian.PutUint64(key[8*i:], uint64(r.intn(max(n, 1))))
	}
	for c := 1; c < 40; c++ {
		t := wideTypes[c%len(wideTypes)]
		name := fmt.Sprintf("c%02d_%v", c, t)
		switch t {
		case partition.String:
			g.comments(name, 0, 24)
		case partition.Binary:
			v := newVarCol(n, 8)
			for range n {
				for range r.intn(3) {
					v.data = append(v.data, binaryTokens[r.intn(len(binaryTokens))]...)
				}
				v.end()
			}
			g.cols = append(g.cols, partition.Column{Name: name, Type: t, Offsets: v.off, Data: v.data})
		case partition.Decimal64:
			d := g.decimal(name, 12, 4)
			for i := range n {
				binary.LittleEndian.PutUint64(d[8*i:], uint64(r.intn(100_000)*100))
			}
		default:
			d := g.fixed(name, t)
			g.fillFixed(t, d, c)
		}
	}
}

func (g *gen) types() {
	n := g.rows
	r := &g.r
	key := g.fixed("key", partition.Int64)
	for i := range n {
		binary.LittleEndian.PutUint64(key[8*i:], uint64(r.intn(max(n, 1))))
	}
	// Decimals: mostly prices (few digits), one in eight near the
	// precision's edge.
	wide := func() bool { return r.intn(8) == 0 }
	for t := partition.Bool; t <= partition.Decimal128; t++ {
		if t == partition.Int64 {
			continue
		}
		name := "c_" + t.String()
		switch t {
		case partition.String:
			g.comments(name, 0, 30)
		case partition.Binary:
			v := newVarCol(n, 8)
			for range n {
				for range r.intn(3) {
					v.data = append(v.data, binaryTokens[r.intn(len(binaryTokens))]...)
				}
				v.end()
			}
			g.cols = append(g.cols, partition.Column{Name: name, Type: t, Offsets: v.off, Data: v.data})
		case partition.Decimal32:
			d := g.fixed(name, t)
			g.cols[len(g.cols)-1].Precision, g.cols[len(g.cols)-1].Scale = 9, 2
			for i := range n {
				v := int32(r.intn(200_000)-100_000) * 100
				if wide() {
					v = int32(r.intn(1_999_999_999) - 999_999_999)
				}
				binary.LittleEndian.PutUint32(d[4*i:], uint32(v))
			}
		case partition.Decimal64:
			d := g.fixed(name, t)
			g.cols[len(g.cols)-1].Precision, g.cols[len(g.cols)-1].Scale = 18, 4
			for i := range n {
				v := int64(r.intn(2_000_000)-1_000_000) * 10_000
				if wide() {
					v = int64(r.next()%1_999_999_999_999_999_999) - 999_999_999_999_999_999
				}
				binary.LittleEndian.PutUint64(d[8*i:], uint64(v))
			}
		case partition.Decimal128:
			d := g.fixed(name, t)
			g.cols[len(g.cols)-1].Precision, g.cols[len(g.cols)-1].Scale = 38, 10
			for i := range n {
				// |v| < 2^125 < 10^38 at the edge.
				v := int64(r.intn(2_000_000)-1_000_000) * 10_000_000_000
				lo, hi := uint64(v), v>>63
				if wide() {
					lo, hi = r.next(), int64(r.next())>>(3+r.intn(61))
				}
				binary.LittleEndian.PutUint64(d[16*i:], lo)
				binary.LittleEndian.PutUint64(d[16*i+8:], uint64(hi))
			}
		default:
			g.fillFixed(t, g.fixed(name, t), int(t))
		}
	}
}

// fillFixed fills a fixed-width column with values of moderate entropy,
// varying with the column number c.
func (g *gen) fillFixed(t partition.Type, d []byte, c int) {
	r := &g.r
	span := 1 << (4 + c%12)
	for i := range g.rows {
		switch t {
		case partition.Bool:
			d[i] = byte(r.intn(2))
		case partition.Int8:
			d[i] = byte(r.intn(100))
		case partition.Int16:
			binary.LittleEndian.PutUint16(d[2*i:], uint16(100*r.intn(20)))
		case partition.Int32:
			binary.LittleEndian.PutUint32(d[4*i:], uint32(r.intn(span)))
		case partition.Date32:
			binary.LittleEndian.PutUint32(d[4*i:], uint32(startDate+r.intn(endDate-startDate)))
		case partition.Int64, partition.TimestampMicros:
			binary.LittleEndian.PutUint64(d[8*i:], 1_600_000_000_000_000+uint64(r.intn(span)))
		case partition.Float32:
			binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(float32(r.intn(1000))/4))
		case partition.Float64:
			binary.LittleEndian.PutUint64(d[8*i:], math.Float64bits(float64(r.intn(span))/100))
		}
	}
}

// skewKeys redraws the key column from a Zipf distribution, spreading the
// ranks over int64 so that neighbouring ranks do not share a partition.
func (g *gen) skewKeys() {
	z := newZipf(g.cfg.skew, max(g.rows, 1))
	key := g.cols[0].Data
	for i := range g.rows {
		k := z.sample(&g.r)
		binary.LittleEndian.PutUint64(key[8*i:], uint64(k)*0x9E3779B97F4A7C15>>1)
	}
}

// addNulls gives every column but the key a validity bitmap with about
// cfg.nulls of its bits clear. Null strings keep their bytes: values under
// a null are unspecified.
func (g *gen) addNulls() {
	threshold := uint64(g.cfg.nulls * (1 << 32))
	for c := 1; c < len(g.cols); c++ {
		v := make([]byte, (g.rows+7)/8)
		for i := range g.rows {
			if g.r.next()>>32 >= threshold {
				v[i>>3] |= 1 << (i & 7)
			}
		}
		g.cols[c].Validity = v
	}
}

func appendUint(dst []byte, v uint64) []byte {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}

// rng is wyrand: small, fast, and fixed here so that the generated bytes
// never change with the Go release.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng { return rng{s: seed ^ 0x2d358dccaa6c78a5} }

func (r *rng) next() uint64 {
	r.s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(r.s, r.s^0xe7037ed1a0b428db)
	return hi ^ lo
}

// intn returns a value in [0, n) for n > 0 (Lemire's multiply-shift,
// without the rejection step: the bias is below 2^-32 for our n).
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}

// float returns a value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// zipf samples ranks 0..n-1 with probability proportional to (rank+1)^-s
// by inverting a table of the cumulative distribution over the first
// ranks and a continuous approximation of the tail.
type zipf struct {
	cdf []float64 // cumulative weights of ranks 0..len-1
	n   int
	s   float64
	// tail weight: the integral of x^-s from len+0.5 to n+0.5
	head, total float64
}

const zipfTable = 4096

func newZipf(s float64, n int) *zipf {
	z := &zipf{n: n, s: s}
	m := min(n, zipfTable)
	z.cdf = make([]float64, m)
	sum := 0.0
	for k := range m {
		sum += math.Pow(float64(k+1), -s)
		z.cdf[k] = sum
	}
	z.head = sum
	z.total = sum
	if n > m {
		z.total += (math.Pow(float64(m)+0.5, 1-s) - math.Pow(float64(n)+0.5, 1-s)) / (s - 1)
	}
	return z
}

func (z *zipf) sample(r *rng) int {
	u := r.float() * z.total
	if u < z.head {
		k, _ := slices.BinarySearch(z.cdf, u)
		return min(k, len(z.cdf)-1)
	}
	// Invert the tail integral: x^(1-s) = a^(1-s) - (u-head)(s-1).
	a := float64(len(z.cdf)) + 0.5
	x := math.Pow(math.Pow(a, 1-z.s)-(u-z.head)*(z.s-1), 1/(1-z.s))
	k := int(x - 0.5)
	return min(max(k, len(z.cdf)), z.n-1)
}

// Column returns a deterministic random column of field f's shape (its
// type, precision, scale and children at every depth) and rows rows, a
// pure function of its arguments like Generate: with nulls > 0 about that
// fraction of the rows of every other column at every level is null (void
// columns always are); lists, maps, strings and binary hold 0 to 3
// elements or bytes a row; decimals stay within their precision. For
// tests of nested schemas (partition.ParseSchema) that Generate's named
// schemas do not cover.
func Column(f partition.Field, seed int64, rows int, nulls float64) partition.Column {
	r := newRNG(uint64(seed))
	k := 0
	return randomColumn(&r, f, rows, nulls, &k)
}

func randomColumn(r *rng, f partition.Field, rows int, nulls float64, k *int) partition.Column {
	c := partition.Column{Name: f.Name, Type: f.Type, Precision: f.Precision, Scale: f.Scale}
	*k++
	if f.Type == partition.Void || nulls > 0 && *k%2 == 1 {
		c.Validity = make([]byte, (rows+7)/8)
		for i := range rows {
			if f.Type != partition.Void && r.float() >= nulls {
				c.Validity[i>>3] |= 1 << (i & 7)
			}
		}
	}
	switch {
	case f.Type == partition.Struct:
		for _, cf := range f.Children {
			c.Children = append(c.Children, randomColumn(r, cf, rows, nulls, k))
		}
	case f.Type.HasOffsets():
		c.Offsets = make([]int32, rows+1)
		for i := range rows {
			c.Offsets[i+1] = c.Offsets[i] + int32(r.intn(4))
		}
		n := int(c.Offsets[rows])
		if f.Type.VarWidth() {
			c.Data = make([]byte, n)
			for i := range c.Data {
				c.Data[i] = byte('a' + r.intn(26))
			}
		} else {
			c.Children = []partition.Column{randomColumn(r, f.Children[0], n, nulls, k)}
		}
	default:
		w := f.Type.Width()
		c.Data = make([]byte, rows*w)
		for i := range rows {
			v := r.next()
			switch {
			case f.Type == partition.Bool:
				v &= 1
			case f.Type.IsDecimal() && f.Precision <= partition.MaxDecimal64Precision:
				v = uint64(int64(v%(2*pow10(f.Precision)-1)) - int64(pow10(f.Precision)-1))
			case f.Type == partition.Decimal128:
				v %= pow10(min(f.Precision, 19))
			}
			for b := range w {
				if b < 8 {
					c.Data[i*w+b] = byte(v >> (8 * b))
				}
			}
		}
	}
	return c
}

// pow10 returns 10^p for p <= 19.
func pow10(p int8) uint64 {
	v := uint64(1)
	for range p {
		v *= 10
	}
	return v
}
