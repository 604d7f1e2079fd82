// Runs the lz4 kernels of ../lz4.cu on the CPU (cuda.h), as the daemon
// launches them for a batch: lz4_gather (a columnar plan's records out of
// the batch), lz4_compress, lz4_scan, lz4_compact, lz4_adler. Built and
// driven by gpu/emu_test.go, with KERNELS naming the rewritten lz4.cu.
//
// stdin, little-endian: u64 njobs, then per job u64 src (an offset into
// the payload, or into the gathered bytes when there are ops), u64 slot,
// u32 len, u32 level; u64 payload length and the payload; u64 scratch
// length; u64 nops, and when it is not 0: u64 gathered length, u64 meta
// length and the meta bytes, then per op u64 head, u64 n, u64 src (an
// offset into the payload, or into meta when the next u64 is 1), u64
// from-meta, u64 dst (an offset into the gathered bytes). stdout: the
// njobs+1 offsets (i64) of the compacted framed blocks, their bytes, and
// the njobs Adler-32 (u32).
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
	uint64_t slen = get<uint64_t>();
	long long nops = (long long)get<uint64_t>();
	std::vector<u8> gathered, meta;
	std::vector<Op> ops(nops);
	const u8 *base = payload.data();
	if (nops > 0) {
		gathered.assign(get<uint64_t>() + 64, 0); // zeroed, as the daemon's memset does
		meta.resize(get<uint64_t>());
		for (auto &b : meta) {
			b = get<u8>();
		}
		for (auto &op : ops) {
			op.head = get<uint64_t>();
			op.n = get<uint64_t>();
			uint64_t src = get<uint64_t>();
			op.src = (uint64_t)((get<uint64_t>() ? meta.data() : payload.data()) + src);
			op.dst = (uint64_t)(gathered.data() + get<uint64_t>());
		}
		const Op *op = ops.data();
		// lz4_gather and lz4_compact stride by blockDim: a warp a block does
		// the same work as the daemon's 256 threads, with fewer threads to run.
		emu_launch((unsigned)nops, 32, [&] { lz4_gather(op, nops); });
		base = gathered.data();
	}
	for (long long j = 0; j < njobs; j++) {
		jobs[j].src = jobs[j].len > 0 ? (uint64_t)(base + srcs[j]) : 0;
	}
	std::vector<u8> scratch(slen), out(slen);
	std::vector<long long> sizes(njobs), offs(njobs + 1);
	std::vector<u32> sums(njobs);
	const Job *jp = jobs.data();
	emu_launch((unsigned)((njobs + WARPS - 1) / WARPS), 32 * WARPS, [&] { lz4_compress(jp, njobs, scratch.data(), sizes.data()); });
	emu_launch(1, SCAN_THREADS, [&] { lz4_scan(sizes.data(), offs.data(), njobs); });
	emu_launch((unsigned)njobs, 32, [&] { lz4_compact(jp, sizes.data(), offs.data(), scratch.data(), out.data(), njobs); });
	emu_launch((unsigned)njobs, ADLER_THREADS, [&] { lz4_adler(offs.data(), out.data(), sums.data(), njobs); });
	put(offs.data(), 8 * offs.size());
	put(out.data(), (size_t)offs[njobs]);
	put(sums.data(), 4 * sums.size());
	return 0;
}
