package server

import (
	"fmt"
	"time"

	"github.com/shuffled/shuffled/metrics"
	"github.com/shuffled/shuffled/protocol"
	"github.com/shuffled/shuffled/writer"
)

func (sess *session) commit(id uint32, m *protocol.Commit) error {
	o, err := sess.take(m.Handle)
	if err != nil {
		return err
	}
	if o.failed != nil {
		return fmt.Errorf("%w: map output %d/%d: %v", writer.ErrAborted, o.id.Shuffle, o.id.Map, o.failed)
	}
	sess.commits.Add(1)
	log := sess.log // the session's goroutine replaces sess.log when it registers again
	go func() {
		defer sess.commits.Done()
		s := sess.s
		start := time.Now()
		res, err := o.w.Commit(sess.ctx)
		if o.res != nil {
			if err != nil {
				s.disks.ReportError(o.res.Disk(), err)
			} else {
				s.disks.ReportSuccess(o.res.Disk())
			}
		}
		// The map output stops counting as open (--max-open-outputs, the
		// partition state, Stats) before its client hears the result: a
		// client at the bound may open its next one at once.
		if err != nil {
			o.end(s, true)
			sess.reply(id, err)
		} else {
			elapsed := time.Since(start)
			s.metrics.Commits.Inc()
			s.commits.Add(1)
			s.metrics.CommitSeconds.Observe(elapsed.Seconds())
			if o.last {
				s.metrics.MarkedCommits.Inc()
				s.markedCommits.Add(1)
			}
			if res.EarlyMerge {
				s.metrics.EarlyMerges.Inc()
				s.earlyMerges.Add(1)
			}
			if !res.Existing {
				for _, ph := range []struct {
					name string
					d    time.Duration
				}{{metrics.PhaseEncodeWait, res.EncodeWait}, {metrics.PhaseMergeTail, res.MergeTail}, {metrics.PhaseFiles, res.Files}} {
					s.metrics.CommitPhaseSeconds.WithLabelValues(ph.name).Observe(ph.d.Seconds())
				}
			}
			s.metrics.RunsPerMapOutput.Observe(float64(res.Runs))
			s.metrics.BytesOut.Add(float64(res.BytesOut))
			s.metrics.MergeBytes.Add(float64(res.MergeBytes))
			s.metrics.Records.Add(float64(res.Records))
			cr := &protocol.CommitResult{Lengths: res.Lengths, Existing: res.Existing, Runs: int32(res.Runs)}
			if res.Existing {
				cr.Runs = 0
			}
			if res.Checksums != nil {
				cr.Checksums = make([]int64, len(res.Checksums))
				for i, c := range res.Checksums {
					cr.Checksums[i] = int64(c)
				}
			}
			o.end(s, false)
			sess.send(id, cr)
			log.Debug("map output committed", "shuffle", o.id.Shuffle, "map", o.id.Map, "runs", res.Runs, "bytes", res.BytesOut, "existing", res.Existing, "latency", elapsed)
		}
	}()
	return nil
}
