// Package plot sweeps the load generator's compare mode over the number of
// partitions and of batches per task, and draws the throughput of the
// stream, legacy and ceiling writers against each as a PNG.
//
// The main invariant: every point of a sweep is the same workload as the
// sweep's base configuration but for the one parameter swept, so the lines
// differ by that parameter and the writer mode only.
package plot

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"

	"github.com/shuffled/shuffled/loadgen"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ErrNoPoints is returned by Draw for a result with an empty sweep.
var ErrNoPoints = errors.New("plot: no points to draw")

// Sweep describes the two sweeps: Partitions at Base.BatchesPerTask, and
// Batches at Base.Partitions.
type Sweep struct {
	Base       loadgen.Config
	Partitions []int
	Batches    []int
}

// DefaultSweep returns partitions 1 to 10 000 and batches per task 1 to 8
// over a small lineitem workload. Concurrency is 1: the legacy writer keeps
// one file open per partition, and 10 000 partitions per task in flight
// use 10 000 descriptors.
func DefaultSweep() Sweep {
	c := loadgen.DefaultConfig()
	c.Compare = true
	c.Tasks, c.Concurrency, c.Rows, c.BatchesPerTask, c.Partitions = 8, 1, 50_000, 2, 200
	return Sweep{
		Base:       c,
		Partitions: []int{1, 10, 100, 1000, 3000, 10000},
		Batches:    []int{1, 2, 3, 4, 5, 6, 7, 8},
	}
}

// Point is the median throughputs, in serialized MB/s, of one
// configuration.
type Point struct {
	Partitions     int
	BatchesPerTask int
	Stream         float64
	Legacy         float64
	Ceiling        float64
}

// Result holds both sweeps' points, in sweep order.
type Result struct {
	ByPartitions []Point
	ByBatches    []Point
}

// Run runs the compare mode at every point of s, reporting each point on
// progress (if not nil) as it completes.
func Run(ctx context.Context, s Sweep, progress io.Writer) (Result, error) {
	var r Result
	point := func(partitions, batches int) (Point, error) {
		c := s.Base
		c.Partitions, c.BatchesPerTask = partitions, batches
		cmp, err := loadgen.Compare(ctx, c, nil)
		if err != nil {
			return Point{}, fmt.Errorf("plot: partitions %d, batches per task %d: %w", partitions, batches, err)
		}
		p := Point{Partitions: partitions, BatchesPerTask: batches}
		for _, m := range cmp.Modes {
			switch m.Mode {
			case "stream":
				p.Stream = m.ThroughputMBs
			case "legacy":
				p.Legacy = m.ThroughputMBs
			case "ceiling":
				p.Ceiling = m.ThroughputMBs
			}
		}
		if progress != nil {
			fmt.Fprintf(progress, "shuffled-plot: partitions %d, batches per task %d: stream %.1f, legacy %.1f, ceiling %.1f MB/s\n",
				partitions, batches, p.Stream, p.Legacy, p.Ceiling)
		}
		return p, nil
	}
	for _, n := range s.Partitions {
		p, err := point(n, s.Base.BatchesPerTask)
		if err != nil {
			return r, err
		}
		r.ByPartitions = append(r.ByPartitions, p)
	}
	for _, b := range s.Batches {
		p, err := point(s.Base.Partitions, b)
		if err != nil {
			return r, err
		}
		r.ByBatches = append(r.ByBatches, p)
	}
	return r, nil
}

// csvHeader is the header of WriteCSV's table.
var csvHeader = []string{"sweep", "partitions", "batches_per_task", "stream_mb_s", "legacy_mb_s", "ceiling_mb_s"}

// WriteCSV writes r as a table with csvHeader's columns; ReadCSV reads it
// back.
func (r Result) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	for _, sweep := range []struct {
		name   string
		points []Point
	}{{"partitions", r.ByPartitions}, {"batches", r.ByBatches}} {
		for _, p := range sweep.points {
			cw.Write([]string{sweep.name, strconv.Itoa(p.Partitions), strconv.Itoa(p.BatchesPerTask), f(p.Stream), f(p.Legacy), f(p.Ceiling)})
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads what WriteCSV wrote.
func ReadCSV(rd io.Reader) (Result, error) {
	var r Result
	recs, err := csv.NewReader(rd).ReadAll()
	if err != nil {
		return r, fmt.Errorf("plot: read csv: %w", err)
	}
	if len(recs) == 0 {
		return r, fmt.Errorf("plot: read csv: empty, want the header %q", csvHeader)
	}
	if len(recs[0]) != len(csvHeader) || recs[0][0] != csvHeader[0] {
		return r, fmt.Errorf("plot: read csv: header %q, want %q", recs[0], csvHeader)
	}
	for i, rec := range recs[1:] {
		if len(rec) != len(csvHeader) {
			return r, fmt.Errorf("plot: read csv: line %d has %d fields, want %d", i+2, len(rec), len(csvHeader))
		}
		var p Point
		ints := []*int{&p.Partitions, &p.BatchesPerTask}
		floats := []*float64{&p.Stream, &p.Legacy, &p.Ceiling}
		for j, dst := range ints {
			if *dst, err = strconv.Atoi(rec[1+j]); err != nil {
				return r, fmt.Errorf("plot: read csv: line %d, %s: %w", i+2, csvHeader[1+j], err)
			}
		}
		for j, dst := range floats {
			if *dst, err = strconv.ParseFloat(rec[3+j], 64); err != nil {
				return r, fmt.Errorf("plot: read csv: line %d, %s: %w", i+2, csvHeader[3+j], err)
			}
		}
		switch rec[0] {
		case "partitions":
			r.ByPartitions = append(r.ByPartitions, p)
		case "batches":
			r.ByBatches = append(r.ByBatches, p)
		default:
			return r, fmt.Errorf("plot: read csv: line %d: sweep %q, want partitions or batches", i+2, rec[0])
		}
	}
	return r, nil
}

// Draw renders r as a PNG of two panels, throughput against partitions
// (log scale) and against batches per task, one line per writer mode, and
// writes it to w. title heads the image.
func Draw(r Result, title string, w io.Writer) error {
	if len(r.ByPartitions) == 0 || len(r.ByBatches) == 0 {
		return ErrNoPoints
	}
	byParts, err := panel(r.ByPartitions, "partitions (log scale)", func(p Point) float64 { return float64(p.Partitions) })
	if err != nil {
		return err
	}
	byParts.X.Scale = plot.LogScale{}
	byParts.X.Tick.Marker = plot.LogTicks{Prec: -1}
	byParts.Title.Text = fmt.Sprintf("%d batches per task", r.ByPartitions[0].BatchesPerTask)
	byBatches, err := panel(r.ByBatches, "batches per task", func(p Point) float64 { return float64(p.BatchesPerTask) })
	if err != nil {
		return err
	}
	byBatches.Title.Text = fmt.Sprintf("%d partitions", r.ByBatches[0].Partitions)

	const width, height = 11 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	top := draw.Crop(dc, 0, 0, 0, -0.4*vg.Inch)
	head := plot.New()
	head.HideAxes()
	head.Title.Text = title
	head.Draw(draw.Crop(dc, 0, 0, height-0.5*vg.Inch, 0))
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: 0.3 * vg.Inch, PadTop: 0.1 * vg.Inch, PadBottom: 0.1 * vg.Inch, PadLeft: 0.1 * vg.Inch, PadRight: 0.2 * vg.Inch}
	plots := [][]*plot.Plot{{byParts, byBatches}}
	canvases := plot.Align(plots, tiles, top)
	byParts.Draw(canvases[0][0])
	byBatches.Draw(canvases[0][1])
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// panel draws one line per writer mode over points, x given by x.
func panel(points []Point, xLabel string, x func(Point) float64) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "input MB/s (median)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, mode := range []struct {
		name string
		y    func(Point) float64
	}{
		{"stream", func(p Point) float64 { return p.Stream }},
		{"legacy", func(p Point) float64 { return p.Legacy }},
		{"ceiling (compression only)", func(p Point) float64 { return p.Ceiling }},
	} {
		xys := make(plotter.XYs, len(points))
		for j, pt := range points {
			xys[j].X, xys[j].Y = x(pt), mode.y(pt)
		}
		line, dots, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plot: %s line: %w", mode.name, err)
		}
		c := modeColors[i]
		line.Color, dots.Color = c, c
		line.Width = vg.Points(1.5)
		if i == 2 {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line, dots)
		p.Legend.Add(mode.name, line, dots)
	}
	// Room above the lines for the legend.
	p.Y.Min, p.Y.Max = 0, 1.3*p.Y.Max
	return p, nil
}

// modeColors are the lines' colors: stream, legacy, ceiling.
var modeColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
}
