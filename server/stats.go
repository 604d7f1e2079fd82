package server

import (
	"github.com/shuffled/shuffled/protocol"
)

// stats answers Stats.
func (s *Server) stats() *protocol.StatsResult {
	ls := s.eng.Limiter().Stats()
	s.mu.Lock()
	open, conns, state := s.mu.open, len(s.mu.sessions), s.mu.state
	s.mu.Unlock()
	return &protocol.StatsResult{Stats: []protocol.Stat{
		{Name: "bytes_in_flight", Value: ls.InFlight},
		{Name: "bytes_in_flight_limit", Value: ls.Limit},
		{Name: "peak_bytes_in_flight", Value: ls.Peak},
		{Name: "limiter_waits", Value: ls.Waits},
		{Name: "limiter_wait_ns", Value: int64(ls.WaitTime)},
		{Name: "open_map_outputs", Value: int64(open)},
		{Name: "partition_state_bytes", Value: state},
		{Name: "partition_state_limit", Value: s.cfg.PartitionStateLimit},
		{Name: "connections", Value: int64(conns)},
		{Name: "peak_rss_bytes", Value: peakRSS()},
		{Name: "commits_total", Value: s.commits.Load()},
		{Name: "aborts_total", Value: s.aborts.Load()},
		{Name: "marked_commits_total", Value: s.markedCommits.Load()},
		{Name: "early_merges_total", Value: s.earlyMerges.Load()},
	}}
}

// Stats returns the figures a StatsResult reports (docs/protocol.md,
// Stats), for a process that embeds the server.
func (s *Server) Stats() []protocol.Stat { return s.stats().Stats }
