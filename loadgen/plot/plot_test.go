package plot

import (
	"bytes"
	"image/png"
	"reflect"
	"strings"
	"testing"
)

var sample = Result{
	ByPartitions: []Point{{1, 2, 500, 400, 800, 300, 250, 450}, {100, 2, 510.5, 250, 800, 310, 200, 440}, {10000, 2, 200, 10.2, 300, 100, 8, 150}},
	ByBatches:    []Point{{200, 1, 500, 240, 800, 300, 150, 450}, {200, 8, 480, 210, 790, 290, 140, 445}},
}

func TestCSVRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := sample.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), "sweep,partitions,batches_per_task,stream_mb_s,legacy_mb_s,ceiling_mb_s,stream_mb_per_cpu_s,legacy_mb_per_cpu_s,ceiling_mb_per_cpu_s\npartitions,1,2,500.0,400.0,800.0,300.0,250.0,450.0\n") {
		t.Errorf("WriteCSV wrote %q", buf.String())
	}
	got, err := ReadCSV(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample) {
		t.Errorf("ReadCSV(WriteCSV(r)) = %+v, want %+v", got, sample)
	}
	for _, bad := range []string{
		"",
		"a,b\n",
		"sweep,partitions,batches_per_task,stream_mb_s,legacy_mb_s,ceiling_mb_s,stream_mb_per_cpu_s,legacy_mb_per_cpu_s,ceiling_mb_per_cpu_s\nrows,1,2,3,4,5,6,7,8\n",
		"sweep,partitions,batches_per_task,stream_mb_s,legacy_mb_s,ceiling_mb_s,stream_mb_per_cpu_s,legacy_mb_per_cpu_s,ceiling_mb_per_cpu_s\npartitions,x,2,3,4,5,6,7,8\n",
	} {
		if _, err := ReadCSV(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadCSV(%q) succeeded, want an error", bad)
		}
	}
}

func TestDraw(t *testing.T) {
	var buf bytes.Buffer
	if err := Draw(sample, "test", &buf); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatalf("Draw did not write a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 600 {
		t.Errorf("PNG of %v, want at least 800×600", b)
	}
	if err := Draw(Result{ByBatches: sample.ByBatches}, "", &buf); err != ErrNoPoints {
		t.Errorf("Draw of no partition points = %v, want ErrNoPoints", err)
	}
}
