// lz4-java block streams on the GPU: the gather of record payloads (SHFC
// slices out of a partitioned columnar batch), the compression of every
// block of every record in parallel, and the compaction of the variable
// results so that the copy to the host moves only compressed bytes.
//
// The block compressor is the one package gpu/lz4ref implements in Go, bit
// for bit (its package comment states the rules): one warp per block, 32
// positions examined at a time. Lane k looks at position p+k; its candidate
// is the highest lower lane with the same hash, or else the table entry;
// the first lane whose candidate matches starts the match, and lanes up to
// it are inserted (per hash, the highest of them), exactly as the
// sequential loop inserts every position it examines. The match then
// extends forward, and backward over the literals before it, 32 bytes a
// step.
//
// Every kernel parameter is 64 bits wide (pointers, long long): the Go side
// passes each argument as one 64-bit slot.
//
// Regenerate lz4.ptx (on a machine with the CUDA toolkit):
//
//	nvcc -ptx -arch=compute_75 -O3 -o lz4.ptx lz4.cu
//
// Built with -DLZ4_PROF, lane 0 of each warp of lz4_compress also adds the
// clock cycles its blocks spent in each phase to lz4_prof (PROF_* below;
// BenchmarkLZ4Phases reports them). The default build has none of it.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define FULL 0xffffffffu
#ifndef HASH_LOG
#define HASH_LOG 12 // nvcc -DHASH_LOG=N builds other tables (not lz4ref's bytes: for benchmarks)
#endif
#define HASH_SIZE (1 << HASH_LOG)
#define EMPTY 0xffff
#define MIN_MATCH 4
#define LAST_LITERALS 5
#define MF_LIMIT 12
#define HEADER 21
#define SEED 0x9747b28cu
#define MASK 0x0fffffffu
// WARPS is the warps per block of lz4_compress, each compressing a job of
// its own. One: a block's 8 KiB hash table is given back as soon as its
// warp is done, where a block of 4 warps held 32 KiB until its slowest
// job ended (a partition's last block is short). The shared memory then
// holds 25 warps an SM instead of 24, and on the load generator's batch
// the kernel runs 1.44 times as fast with 16 batches in flight (H100;
// docs/benchmarks.md). nvcc -DWARPS=N builds others; the daemon reads
// the block shape from the kernel's launch bounds.
#ifndef WARPS
#define WARPS 1
#endif

// A job is one framed block: len bytes at src (0: the end mark of a
// stream), written at scratch+slot, which has room for HEADER+len bytes.
struct Job {
	u64 src;
	u64 slot;
	u32 len;
	u32 level; // level bits of the token
};

// An op of lz4_gather. kind 0: copy n bytes from src to dst; 1: n bits
// from bit shift of the byte at src, to ceil(n/8) bytes at dst, the bits
// past n zero; 2: n little-endian int32 at src, less base, to dst.
struct Op {
	u64 head; // kind | shift << 8 | (u32)base << 32
	u64 n;
	u64 src;
	u64 dst;
};

// The phases of lz4_prof, and two counts: the steps (positions examined
// 32 at a time) and the blocks compressed.
enum { PROF_CLEAR, PROF_FIND, PROF_EXTEND, PROF_BACK, PROF_PUT, PROF_XXH, PROF_STEPS, PROF_BLOCKS, PROF_N };

#ifdef LZ4_PROF
__device__ unsigned long long lz4_prof[PROF_N];

// Prof accumulates a warp's cycles by phase; it adds them to lz4_prof
// when it goes out of scope.
struct Prof {
	long long t;
	unsigned long long acc[PROF_N];
	int lane;
	__device__ explicit Prof(int lane) : t(clock64()), acc{}, lane(lane) {}
	__device__ void mark(int k) {
		long long now = clock64();
		acc[k] += (unsigned long long)(now - t);
		t = now;
	}
	__device__ ~Prof() {
		if (lane == 0) {
			for (int k = 0; k < PROF_N; k++) {
				atomicAdd(&lz4_prof[k], acc[k]);
			}
		}
	}
};
#define PROF_BEGIN Prof prof_(lane)
#define PROF_MARK(k) prof_.mark(k)
#define PROF_COUNT(k) (prof_.acc[k]++)
#else
#define PROF_BEGIN
#define PROF_MARK(k)
#define PROF_COUNT(k)
#endif

__device__ __forceinline__ u32 rotl(u32 x, int r) { return (x << r) | (x >> (32 - r)); }

__device__ __forceinline__ u32 load32(const u8 *p) {
	return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

__device__ __forceinline__ u32 lz4_hash(u32 v) { return (v * 2654435761u) >> (32 - HASH_LOG); }

extern "C" __global__ void lz4_gather(const Op *ops, long long nops) {
	long long i = blockIdx.x;
	if (i >= nops) {
		return;
	}
	Op op = ops[i];
	u32 kind = (u32)(op.head & 0xff);
	u32 shift = (u32)((op.head >> 8) & 7);
	int base = (int)(u32)(op.head >> 32);
	const u8 *src = (const u8 *)op.src;
	u8 *dst = (u8 *)op.dst;
	long long n = (long long)op.n;
	if (kind == 0) {
		for (long long k = threadIdx.x; k < n; k += blockDim.x) {
			dst[k] = src[k];
		}
	} else if (kind == 1) {
		long long bytes = (n + 7) / 8;
		for (long long k = threadIdx.x; k < bytes; k += blockDim.x) {
			long long rem = n - 8 * k;
			u32 v = src[k] >> shift;
			if (shift != 0 && rem > 8 - (long long)shift) {
				v |= (u32)src[k + 1] << (8 - shift);
			}
			if (rem < 8) {
				v &= (1u << rem) - 1;
			}
			dst[k] = (u8)v;
		}
	} else {
		for (long long k = threadIdx.x; k < n; k += blockDim.x) {
			u32 v = (u32)(load32(src + 4 * k) - (u32)base);
			dst[4 * k] = (u8)v;
			dst[4 * k + 1] = (u8)(v >> 8);
			dst[4 * k + 2] = (u8)(v >> 16);
			dst[4 * k + 3] = (u8)(v >> 24);
		}
	}
}

__device__ __forceinline__ void put32(u8 *p, u32 v) {
	p[0] = (u8)v;
	p[1] = (u8)(v >> 8);
	p[2] = (u8)(v >> 16);
	p[3] = (u8)(v >> 24);
}

// put_len writes the extra bytes of a token length n >= 15 at dst[out:]
// with the whole warp and returns the new output length.
__device__ __forceinline__ int put_len(u8 *dst, int out, int n, int lane) {
	if (n < 15) {
		return out;
	}
	n -= 15;
	int ones = n / 255;
	for (int k = lane; k < ones; k += 32) {
		dst[out + k] = 255;
	}
	if (lane == 0) {
		dst[out + ones] = (u8)(n - 255 * ones);
	}
	return out + ones + 1;
}

__device__ __forceinline__ int ext_len(int n) { return n < 15 ? 0 : (n - 15) / 255 + 1; }

// put_seq writes one sequence (the literals src[anchor:anchor+ll], then a
// match of length ml at offset off; ml 0 for the last sequence) and
// returns the new output length, or -1 when it would not fit in cap. The
// literals' first 32 bytes are already loaded: lane k holds byte k in lit.
__device__ int put_seq(u8 *dst, int out, int cap, const u8 *src, int anchor, int ll, int off, int ml, int lane, u32 lit) {
	int need = 1 + ll + ext_len(ll);
	if (ml > 0) {
		need += 2 + ext_len(ml - MIN_MATCH);
	}
	if (out + need > cap) {
		return -1;
	}
	if (lane == 0) {
		u32 token = (u32)min(ll, 15) << 4;
		if (ml > 0) {
			token |= (u32)min(ml - MIN_MATCH, 15);
		}
		dst[out] = (u8)token;
	}
	out = put_len(dst, out + 1, ll, lane);
	if (lane < ll) {
		dst[out + lane] = (u8)lit;
	}
	for (int k = lane + 32; k < ll; k += 32) {
		dst[out + k] = src[anchor + k];
	}
	out += ll;
	if (ml > 0) {
		if (lane == 0) {
			dst[out] = (u8)off;
			dst[out + 1] = (u8)(off >> 8);
		}
		out = put_len(dst, out + 2, ml - MIN_MATCH, lane);
	}
	return out;
}

// load32a is the 4 bytes at p (any alignment) read as one or two aligned
// words: an aligned word that starts before the end of the bytes cannot
// fault where its first byte does not.
__device__ __forceinline__ u32 load32a(const u8 *p) {
	u64 a = (u64)p;
	const u32 *w = (const u32 *)(a & ~3ull);
	u32 r = (u32)(a & 3);
	u32 lo = w[0];
	u32 hi = r ? w[1] : 0;
	return __funnelshift_r(lo, hi, 8 * r);
}

// win_load loads the warp's window: lane k holds the aligned word at
// base+4k, or 0 past end.
__device__ __forceinline__ u32 win_load(const u8 *base, const u8 *end, int lane) {
	const u8 *a = base + 4 * lane;
	return a < end ? *(const u32 *)a : 0;
}

// win32 is the 4 bytes at offset off (< 124) of the window.
__device__ __forceinline__ u32 win32(u32 w, u32 off) {
	u32 lo = __shfl_sync(FULL, w, off >> 2);
	u32 hi = __shfl_sync(FULL, w, (off >> 2) + 1);
	return __funnelshift_r(lo, hi, 8 * (off & 3));
}

// compress_block compresses src[0:n] into dst with the whole warp and
// returns the compressed length, or 0 when it would not be smaller than n.
__device__ int compress_block(u8 *dst, const u8 *src, int n, u16 *table, int lane) {
	if (n < MF_LIMIT + 1) {
		return 0;
	}
	PROF_BEGIN;
	PROF_COUNT(PROF_BLOCKS);
	for (int k = lane; k < HASH_SIZE; k += 32) {
		table[k] = EMPTY;
	}
	__syncwarp();
	PROF_MARK(PROF_CLEAR);
	const int cap = n - 1;
	const int last_start = n - MF_LIMIT - 1;
	const int match_limit = n - LAST_LITERALS;
	const u32 lt = (1u << lane) - 1; // lanes below this one
	const u8 *end = src + n;
	const u8 *wb = (const u8 *)((u64)src & ~3ull);
	u32 w = win_load(wb, end, lane);
	int out = 0, anchor = 0, p = 0;
	while (p <= last_start) {
		PROF_COUNT(PROF_STEPS);
		u32 off = (u32)(src + p - wb);
		if (off > 92) {
			wb = (const u8 *)((u64)(src + p) & ~3ull);
			w = win_load(wb, end, lane);
			off = (u32)(src + p - wb);
		}
		int i = p + lane;
		bool active = i <= last_start;
		u32 v = win32(w, off + lane);
		u32 h = active ? lz4_hash(v) : (u32)(HASH_SIZE + lane);
		u32 peers = __match_any_sync(FULL, h);
		u32 lower = peers & lt;
		int from = lower ? 31 - __clz(lower) : lane;
		u32 vl = __shfl_sync(FULL, v, from);
		int cand;
		bool valid;
		if (lower) {
			cand = p + from;
			valid = active && vl == v;
		} else {
			cand = active ? (int)table[h] : EMPTY;
			valid = active && cand != EMPTY && load32a(src + cand) == v;
		}
		u32 ball = __ballot_sync(FULL, valid);
		int last = ball ? __ffs(ball) - 1 : 31;
		// Lanes 0..last are examined: each hash gets its highest one.
		u32 upto = last == 31 ? FULL : (1u << (last + 1)) - 1;
		if (active && lane <= last && ((peers & upto) >> lane) == 1) {
			table[h] = (u16)i;
		}
		__syncwarp();
		PROF_MARK(PROF_FIND);
		if (!ball) {
			p += 32;
			continue;
		}
		int m = p + last;
		int c = __shfl_sync(FULL, cand, last);
		// The literals' first bytes load while the match extends.
		u32 lit = lane < m - anchor ? src[anchor + lane] : 0;
		int l = MIN_MATCH;
		for (;;) {
			int pos = m + l + lane;
			bool eq = pos < match_limit && src[pos] == src[c + l + lane];
			u32 ne = __ballot_sync(FULL, !eq);
			if (ne) {
				l += __ffs(ne) - 1;
				break;
			}
			l += 32;
		}
		PROF_MARK(PROF_EXTEND);
		// Catch up: the match extends backward over the literals before
		// it while the bytes before it equal those before the candidate.
		int back = 0;
		for (;;) {
			int d = back + 1 + lane;
			bool eq = d <= m - anchor && d <= c && src[m - d] == src[c - d];
			u32 ne = __ballot_sync(FULL, !eq);
			if (ne) {
				back += __ffs(ne) - 1;
				break;
			}
			back += 32;
		}
		PROF_MARK(PROF_BACK);
		m -= back;
		c -= back;
		l += back;
		out = put_seq(dst, out, cap, src, anchor, m - anchor, m - c, l, lane, lit);
		PROF_MARK(PROF_PUT);
		if (out < 0) {
			return 0;
		}
		p = m + l;
		anchor = p;
	}
	u32 lit = lane < n - anchor ? src[anchor + lane] : 0;
	out = put_seq(dst, out, cap, src, anchor, n - anchor, 0, 0, lane, lit);
	PROF_MARK(PROF_PUT);
	return out < 0 ? 0 : out;
}

// xxh32 is xxHash32 of src[0:n] with SEED, computed by the warp: each
// round loads 128 bytes as aligned words (lane k the k-th), lanes 0-3
// keep v1..v4 and take their stripes' words by shuffle; the result is
// valid in every lane.
__device__ u32 xxh32(const u8 *src, int n, int lane) {
	const u32 p1 = 2654435761u, p2 = 2246822519u, p3 = 3266489917u, p4 = 668265263u, p5 = 374761393u;
	u32 h;
	int tail = 0;
	if (n >= 16) {
		u32 v = SEED;
		if (lane == 0) v = SEED + p1 + p2;
		if (lane == 1) v = SEED + p2;
		if (lane == 3) v = SEED - p1;
		const u8 *end = src + n;
		const u8 *base = (const u8 *)((u64)src & ~3ull);
		u32 sh = 8 * (u32)((u64)src & 3);
		int stripes = n / 16;
		for (int s0 = 0; s0 < stripes; s0 += 8, base += 128) {
			u32 lo = win_load(base, end, lane);
			u32 hi = __shfl_down_sync(FULL, lo, 1);
			if (lane == 31) {
				hi = win_load(base + 128, end, 0);
			}
			u32 word = __funnelshift_r(lo, hi, sh);
			int k = min(8, stripes - s0);
#pragma unroll
			for (int u = 0; u < 8; u++) {
				u32 x = __shfl_sync(FULL, word, 4 * u + (lane & 3));
				if (u < k) {
					v = rotl(v + x * p2, 13) * p1;
				}
			}
		}
		u32 v1 = __shfl_sync(FULL, v, 0), v2 = __shfl_sync(FULL, v, 1);
		u32 v3 = __shfl_sync(FULL, v, 2), v4 = __shfl_sync(FULL, v, 3);
		h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
		tail = n & ~15;
	} else {
		h = SEED + p5;
	}
	h += (u32)n;
	for (; tail + 4 <= n; tail += 4) {
		h += load32(src + tail) * p3;
		h = rotl(h, 17) * p4;
	}
	for (; tail < n; tail++) {
		h += (u32)src[tail] * p5;
		h = rotl(h, 11) * p1;
	}
	h ^= h >> 15;
	h *= p2;
	h ^= h >> 13;
	h *= p3;
	h ^= h >> 16;
	return h;
}

__device__ void put_header(u8 *h, u32 token, u32 comp, u32 orig, u32 sum) {
	const char magic[8] = {'L', 'Z', '4', 'B', 'l', 'o', 'c', 'k'};
	for (int k = 0; k < 8; k++) {
		h[k] = (u8)magic[k];
	}
	h[8] = (u8)token;
	put32(h + 9, comp);
	put32(h + 13, orig);
	put32(h + 17, sum);
}

// frame_job frames job with the whole warp: src is where the warp reads
// the block's bytes (global memory, or the warp's copy in shared memory),
// out its slot; it returns the framed length.
__device__ __forceinline__ long long frame_job(const Job &job, const u8 *src, u8 *out, u16 *table, int lane) {
	int n = (int)job.len;
	if (n == 0) {
		if (lane == 0) {
			put_header(out, 0x10 | job.level, 0, 0, 0);
		}
		return HEADER;
	}
	u32 sum;
	{
		PROF_BEGIN;
		sum = xxh32(src, n, lane) & MASK;
		PROF_MARK(PROF_XXH);
	}
	int comp = compress_block(out + HEADER, src, n, table, lane);
	u32 method = 0x20;
	if (comp == 0) {
		method = 0x10;
		comp = n;
		// The failed attempt's writes (lane 0's tokens among them) land
		// before the raw copy overwrites them.
		__syncwarp();
		for (int k = lane; k < n; k += 32) {
			out[HEADER + k] = src[k];
		}
	}
	if (lane == 0) {
		put_header(out, method | job.level, (u32)comp, (u32)n, sum);
	}
	return HEADER + comp;
}

// lz4_compress frames job j with warp j of the grid, reading the block
// from global memory, and sets sizes[j] to the framed length.
extern "C" __global__ void __launch_bounds__(32 * WARPS) lz4_compress(const Job *jobs, long long njobs, u8 *scratch, long long *sizes) {
	__shared__ u16 tables[WARPS][HASH_SIZE];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	long long j = (long long)blockIdx.x * WARPS + warp;
	if (j >= njobs) {
		return;
	}
	Job job = jobs[j];
	long long size = frame_job(job, (const u8 *)job.src, scratch + job.slot, tables[warp], lane);
	if (lane == 0) {
		sizes[j] = size;
	}
}

// load_nc loads 16 bytes of global memory through the read-only cache
// (what __ldg does, spelled out so that the PTX depends on no header).
__device__ __forceinline__ uint4 load_nc(const uint4 *p) {
	uint4 v;
	asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
	return v;
}

// lz4_compress_smem is lz4_compress with one warp per block of threads,
// which first copies its block into shared memory (16-byte loads, the
// copy placed at the source's offset within 16 bytes so that the loads
// stay aligned) and compresses it from there. Its dynamic shared memory
// is the hash table, then at least the block size plus 16 bytes. It makes
// the same bytes as lz4_compress but, measured on an H200, about 1.5 times
// slower: the shared memory per warp leaves 5 warps per SM instead of 25,
// and a batch fits the L2 cache anyway. The daemon uses lz4_compress.
extern "C" __global__ void __launch_bounds__(32) lz4_compress_smem(const Job *jobs, long long njobs, u8 *scratch, long long *sizes) {
	extern __shared__ uint4 smem[];
	u16 *table = (u16 *)smem;
	u8 *buf = (u8 *)smem + 2 * HASH_SIZE;
	int lane = threadIdx.x;
	long long j = blockIdx.x;
	if (j >= njobs) {
		return;
	}
	Job job = jobs[j];
	const u8 *src = (const u8 *)job.src;
	if (job.len > 0) {
		u64 head = job.src & 15;
		const uint4 *from = (const uint4 *)(job.src - head);
		uint4 *to = (uint4 *)buf;
		int words = (int)((head + job.len + 15) / 16);
		for (int k = lane; k < words; k += 32) {
			to[k] = load_nc(from + k);
		}
		__syncwarp();
		src = buf + head;
	}
	long long size = frame_job(job, src, scratch + job.slot, table, lane);
	if (lane == 0) {
		sizes[j] = size;
	}
}

#define SCAN_THREADS 1024

// lz4_scan sets offs[0:n+1] to the exclusive prefix sums of sizes[0:n]
// (offs[n] the total), with one block of SCAN_THREADS threads.
extern "C" __global__ void lz4_scan(const long long *sizes, long long *offs, long long n) {
	__shared__ long long part[SCAN_THREADS];
	long long per = (n + SCAN_THREADS - 1) / SCAN_THREADS;
	long long lo = min(n, per * threadIdx.x), hi = min(n, lo + per);
	long long s = 0;
	for (long long k = lo; k < hi; k++) {
		s += sizes[k];
	}
	part[threadIdx.x] = s;
	__syncthreads();
	for (int d = 1; d < SCAN_THREADS; d *= 2) {
		long long add = threadIdx.x >= d ? part[threadIdx.x - d] : 0;
		__syncthreads();
		part[threadIdx.x] += add;
		__syncthreads();
	}
	long long run = part[threadIdx.x] - s;
	for (long long k = lo; k < hi; k++) {
		offs[k] = run;
		run += sizes[k];
	}
	if (threadIdx.x == SCAN_THREADS - 1) {
		offs[n] = part[SCAN_THREADS - 1];
	}
}

// lz4_compact copies framed block j from its slot to out+offs[j], one
// block of threads per job.
extern "C" __global__ void lz4_compact(const Job *jobs, const long long *sizes, const long long *offs, const u8 *scratch, u8 *out, long long njobs) {
	long long j = blockIdx.x;
	if (j >= njobs) {
		return;
	}
	const u8 *src = scratch + jobs[j].slot;
	u8 *dst = out + offs[j];
	long long n = sizes[j];
	for (long long k = threadIdx.x; k < n; k += blockDim.x) {
		dst[k] = src[k];
	}
}

#define ADLER_BASE 65521u
#define ADLER_THREADS 256 // threads per block of lz4_adler

// lz4_adler sets sums[j] to the Adler-32 (RFC 1950, starting from 1) of
// framed block j as lz4_compact left it, out[offs[j]:offs[j+1]], with one
// block of ADLER_THREADS threads per job; the host combines a stream's
// blocks.
//
// For the n bytes x_0..x_{n-1}, s1 after byte k is 1 + x_0 + ... + x_k,
// and s2 is the sum of those n values of s1, so (mod ADLER_BASE)
//
//	s1 = 1 + S,  s2 = n + sum_k (n-k)·x_k = n + n·S - W,
//
// with S = sum_k x_k and W = sum_k k·x_k. Thread t sums the bytes
// k = t, t+ADLER_THREADS, ... (neighbouring threads read neighbouring
// bytes): S in full, W with k kept modulo ADLER_BASE, so that every term
// is below 2^24 and 64-bit sums cannot overflow; the block then adds the
// threads' sums, each reduced modulo ADLER_BASE first.
extern "C" __global__ void __launch_bounds__(ADLER_THREADS) lz4_adler(const long long *offs, const u8 *out, u32 *sums, long long njobs) {
	__shared__ u64 ps[ADLER_THREADS], pw[ADLER_THREADS];
	long long j = blockIdx.x;
	if (j >= njobs) {
		return;
	}
	const u8 *src = out + offs[j];
	long long n = offs[j + 1] - offs[j];
	int t = threadIdx.x;
	u64 s = 0, w = 0;
	u32 km = (u32)t; // k mod ADLER_BASE (ADLER_THREADS < ADLER_BASE)
	for (long long k = t; k < n; k += ADLER_THREADS) {
		u32 x = src[k];
		s += x;
		w += (u64)km * x;
		km += ADLER_THREADS;
		if (km >= ADLER_BASE) {
			km -= ADLER_BASE;
		}
	}
	ps[t] = s % ADLER_BASE;
	pw[t] = w % ADLER_BASE;
	__syncthreads();
	for (int d = ADLER_THREADS / 2; d > 0; d /= 2) {
		if (t < d) {
			ps[t] += ps[t + d];
			pw[t] += pw[t + d];
		}
		__syncthreads();
	}
	if (t == 0) {
		u64 nm = (u64)n % ADLER_BASE;
		u64 sm = ps[0] % ADLER_BASE;
		u64 wm = pw[0] % ADLER_BASE;
		u64 s1 = (1 + sm) % ADLER_BASE;
		u64 s2 = (nm + nm * sm + ADLER_BASE - wm) % ADLER_BASE;
		sums[j] = (u32)(s2 << 16 | s1);
	}
}
