// Runs the lz4 kernels of ../lz4.cu on the CPU (cuda.h), as the daemon
// launches them for a batch whose records are already gathered:
// lz4_compress, lz4_scan, lz4_compact, lz4_adler. Built and driven by
// gpu/emu_test.go, with KERNELS naming the rewritten lz4.cu.
//
// stdin, little-endian: u64 njobs, then per job u64 src (offset into the
// payload), u64 slot, u32 len, u32 level; u64 payload length and the
// payload; u64 scratch length. stdout: the njobs+1 offsets (i64) of the
// compacted framed blocks, their bytes, and the njobs Adler-32 (u32).
#include "cuda.h"

#include <cstdio>
#include <string>

#include KERNELS

namespace {

const char *in, *end;

template <class T> T get() {
	if (end - in < (long)sizeof(T)) {
		std::fprintf(stderr, "emu: input ends early\n");
		std::exit(2);
	}
	T v;
	std::memcpy(&v, in, sizeof v);
	in += sizeof v;
	return v;
}

void put(const void *p, size_t n) {
	if (n > 0 && std::fwrite(p, 1, n, stdout) != n) {
		std::exit(3);
	}
}

} // namespace

int main() {
	std::string all;
	char buf[1 << 16];
	for (size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
		all.append(buf, n);
	}
	in = all.data();
	end = in + all.size();
	long long njobs = (long long)get<uint64_t>();
	std::vector<Job> jobs(njobs);
	std::vector<uint64_t> srcs(njobs);
	for (long long j = 0; j < njobs; j++) {
		srcs[j] = get<uint64_t>();
		jobs[j].slot = get<uint64_t>();
		jobs[j].len = get<uint32_t>();
		jobs[j].level = get<uint32_t>();
	}
	uint64_t plen = get<uint64_t>();
	std::vector<u8> payload(plen + 64); // slack: aligned words past the end stay readable, as on the device
	if ((uint64_t)(end - in) < plen) {
		std::fprintf(stderr, "emu: payload ends early\n");
		return 2;
	}
	std::memcpy(payload.data(), in, plen);
	in += plen;
	for (long long j = 0; j < njobs; j++) {
		jobs[j].src = jobs[j].len > 0 ? (uint64_t)(payload.data() + srcs[j]) : 0;
	}
	uint64_t slen = get<uint64_t>();
	std::vector<u8> scratch(slen), out(slen);
	std::vector<long long> sizes(njobs), offs(njobs + 1);
	std::vector<u32> sums(njobs);
	const Job *jp = jobs.data();
	emu_launch((unsigned)((njobs + WARPS - 1) / WARPS), 32 * WARPS, [&] { lz4_compress(jp, njobs, scratch.data(), sizes.data()); });
	emu_launch(1, SCAN_THREADS, [&] { lz4_scan(sizes.data(), offs.data(), njobs); });
	emu_launch((unsigned)njobs, 256, [&] { lz4_compact(jp, sizes.data(), offs.data(), scratch.data(), out.data(), njobs); });
	emu_launch((unsigned)njobs, ADLER_THREADS, [&] { lz4_adler(offs.data(), out.data(), sums.data(), njobs); });
	put(offs.data(), 8 * offs.size());
	put(out.data(), (size_t)offs[njobs]);
	put(sums.data(), 4 * sums.size());
	return 0;
}
