// Package plot sweeps the load generator's compare mode over the number of
// partitions and of batches per task, and draws the throughput of the
// stream, legacy and ceiling writers against each as a PNG, in MB per
// second and in MB per CPU second.
//
// The main invariant: every point of a sweep is the same workload as the
// sweep's base configuration but for the one parameter swept, so the lines
// differ by that parameter and the writer mode only.
package plot

import (
	"context"
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"strconv"

	"github.com/shuffled/shuffled/errdefs"
	"github.com/shuffled/shuffled/loadgen"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// ErrNoPoints is returned by Draw for a result with an empty sweep.
var ErrNoPoints = errdefs.New(errdefs.ErrInvalidArgument, "plot: no points to draw")

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

// Point is one configuration's medians per writer mode: throughput in
// serialized MB per second of wall time, and serialized MB per CPU second.
type Point struct {
	Partitions     int
	BatchesPerTask int
	Stream         float64
	Legacy         float64
	Ceiling        float64
	StreamCPU      float64
	LegacyCPU      float64
	CeilingCPU     float64
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
				p.Stream, p.StreamCPU = m.ThroughputMBs, m.MBPerCPUS
			case "legacy":
				p.Legacy, p.LegacyCPU = m.ThroughputMBs, m.MBPerCPUS
			case "ceiling":
				p.Ceiling, p.CeilingCPU = m.ThroughputMBs, m.MBPerCPUS
			}
		}
		if progress != nil {
			fmt.Fprintf(progress, "shuffled-plot: partitions %d, batches per task %d: stream %.1f, legacy %.1f, ceiling %.1f MB/s; per CPU second %.1f, %.1f, %.1f MB\n",
				partitions, batches, p.Stream, p.Legacy, p.Ceiling, p.StreamCPU, p.LegacyCPU, p.CeilingCPU)
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
var csvHeader = []string{"sweep", "partitions", "batches_per_task", "stream_mb_s", "legacy_mb_s", "ceiling_mb_s",
	"stream_mb_per_cpu_s", "legacy_mb_per_cpu_s", "ceiling_mb_per_cpu_s"}

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
			cw.Write([]string{sweep.name, strconv.Itoa(p.Partitions), strconv.Itoa(p.BatchesPerTask),
				f(p.Stream), f(p.Legacy), f(p.Ceiling), f(p.StreamCPU), f(p.LegacyCPU), f(p.CeilingCPU)})
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
		floats := []*float64{&p.Stream, &p.Legacy, &p.Ceiling, &p.StreamCPU, &p.LegacyCPU, &p.CeilingCPU}
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

// Draw renders r as a PNG of four panels, throughput (top) and MB per CPU
// second (bottom) against partitions (log scale, left) and batches per
// task (right), one line per writer mode, and writes it to w. title heads
// the image.
func Draw(r Result, title string, w io.Writer) error {
	if len(r.ByPartitions) == 0 || len(r.ByBatches) == 0 {
		return ErrNoPoints
	}
	partsX := func(p Point) float64 { return float64(p.Partitions) }
	batchesX := func(p Point) float64 { return float64(p.BatchesPerTask) }
	wall := "input MB/s (median)"
	cpu := "input MB per CPU second (median)"
	var plots [2][2]*plot.Plot
	for row, m := range []struct {
		label string
		ys    [3]func(Point) float64
	}{
		{wall, [3]func(Point) float64{func(p Point) float64 { return p.Stream }, func(p Point) float64 { return p.Legacy }, func(p Point) float64 { return p.Ceiling }}},
		{cpu, [3]func(Point) float64{func(p Point) float64 { return p.StreamCPU }, func(p Point) float64 { return p.LegacyCPU }, func(p Point) float64 { return p.CeilingCPU }}},
	} {
		var err error
		if plots[row][0], err = panel(r.ByPartitions, "partitions (log scale)", m.label, partsX, m.ys); err != nil {
			return err
		}
		plots[row][0].X.Scale = plot.LogScale{}
		plots[row][0].X.Tick.Marker = plot.LogTicks{Prec: -1}
		if plots[row][1], err = panel(r.ByBatches, "batches per task", m.label, batchesX, m.ys); err != nil {
			return err
		}
	}
	plots[0][0].Title.Text = fmt.Sprintf("by partitions, %d batches per task", r.ByPartitions[0].BatchesPerTask)
	plots[0][1].Title.Text = fmt.Sprintf("by batches per task, %d partitions", r.ByBatches[0].Partitions)

	const width, height = 11 * vg.Inch, 8.5 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	head := plot.New()
	head.HideAxes()
	head.Title.Text = title
	head.Draw(draw.Crop(dc, 0, 0, height-0.5*vg.Inch, 0))
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: 0.3 * vg.Inch, PadY: 0.3 * vg.Inch, PadTop: 0.1 * vg.Inch, PadBottom: 0.1 * vg.Inch, PadLeft: 0.1 * vg.Inch, PadRight: 0.2 * vg.Inch}
	grid := [][]*plot.Plot{plots[0][:], plots[1][:]}
	canvases := plot.Align(grid, tiles, draw.Crop(dc, 0, 0, 0, -0.4*vg.Inch))
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// modeNames label the lines: stream, legacy, ceiling.
var modeNames = [3]string{"stream", "legacy", "ceiling (compression only)"}

// panel draws one line per writer mode over points: x by x, y by ys.
func panel(points []Point, xLabel, yLabel string, x func(Point) float64, ys [3]func(Point) float64) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, y := range ys {
		xys := make(plotter.XYs, len(points))
		for j, pt := range points {
			xys[j].X, xys[j].Y = x(pt), y(pt)
		}
		line, dots, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("plot: %s line: %w", modeNames[i], err)
		}
		c := modeColors[i]
		line.Color, dots.Color = c, c
		line.Width = vg.Points(1.5)
		if i == 2 {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(line, dots)
		p.Legend.Add(modeNames[i], line, dots)
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
