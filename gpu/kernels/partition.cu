// Hash partitioning of a columnar batch on the GPU, as Spark's
// HashPartitioner does it: Murmur3 (Spark's variant, seed 42) of the key
// columns, pmod numPartitions, then a stable scatter of every column into
// partition order.
//
// Every kernel parameter is 64 bits wide (pointers, long long): the Go side
// passes each argument as one 64-bit slot.
//
// Regenerate partition.ptx (on a machine with the CUDA toolkit):
//
//	nvcc -ptx -arch=compute_75 -O3 -o partition.ptx partition.cu
//
// compute_75 PTX runs on every GPU since Turing; the driver compiles it for
// the device it finds when the module is loaded.

#include <stdint.h>

#define SEED 42
#define WARP 32
#define SCAN_THREADS 1024
#define SCAN_ITEMS 4
#define SCAN_TILE (SCAN_THREADS * SCAN_ITEMS)

__device__ __forceinline__ uint32_t rotl32(uint32_t x, int r) {
	return (x << r) | (x >> (32 - r));
}

__device__ __forceinline__ uint32_t mix_k1(uint32_t k) {
	k *= 0xcc9e2d51u;
	k = rotl32(k, 15);
	return k * 0x1b873593u;
}

__device__ __forceinline__ uint32_t mix_h1(uint32_t h, uint32_t k) {
	h ^= k;
	h = rotl32(h, 13);
	return h * 5u + 0xe6546b64u;
}

__device__ __forceinline__ uint32_t fmix(uint32_t h, uint32_t len) {
	h ^= len;
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

__device__ __forceinline__ uint32_t hash_int(uint32_t v, uint32_t seed) {
	return fmix(mix_h1(seed, mix_k1(v)), 4);
}

__device__ __forceinline__ uint32_t hash_long(uint64_t v, uint32_t seed) {
	uint32_t h = mix_h1(seed, mix_k1((uint32_t)v));
	h = mix_h1(h, mix_k1((uint32_t)(v >> 32)));
	return fmix(h, 8);
}

// Spark's hashUnsafeBytes: 4-byte little-endian blocks, then each tail
// byte sign-extended and mixed as a block of its own.
__device__ uint32_t hash_bytes(const uint8_t *b, int n, uint32_t seed) {
	uint32_t h = seed;
	int aligned = n & ~3;
	for (int i = 0; i < aligned; i += 4) {
		uint32_t k = (uint32_t)b[i] | ((uint32_t)b[i + 1] << 8) | ((uint32_t)b[i + 2] << 16) |
		             ((uint32_t)b[i + 3] << 24);
		h = mix_h1(h, mix_k1(k));
	}
	for (int i = aligned; i < n; i++) {
		h = mix_h1(h, mix_k1((uint32_t)(int32_t)(int8_t)b[i]));
	}
	return fmix(h, (uint32_t)n);
}

// Spark's hash of a DecimalType with precision > 18: hashUnsafeBytes of
// BigInteger.toByteArray of the unscaled value, the shortest big-endian
// two's complement that holds it (at least one byte: 0 is 00, 128 is
// 00 80, -129 is ff 7f). lo and hi are the value's two 64-bit halves.
__device__ uint32_t hash_decimal128(uint64_t lo, uint64_t hi, uint32_t seed) {
	uint8_t be[16];
	for (int i = 0; i < 8; i++) {
		be[i] = (uint8_t)(hi >> (56 - 8 * i));
		be[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
	}
	int skip = 0;
	while (skip < 15 && ((be[skip] == 0 && (be[skip + 1] & 0x80) == 0) ||
	                     (be[skip] == 0xff && (be[skip + 1] & 0x80) != 0))) {
		skip++;
	}
	return hash_bytes(be + skip, 16 - skip, seed);
}

__device__ __forceinline__ bool is_valid(const uint8_t *validity, long long i) {
	return validity == 0 || ((validity[i >> 3] >> (i & 7)) & 1);
}

// hash_init sets every row's running hash to Spark's seed.
extern "C" __global__ void hash_init(uint32_t *hash, long long rows) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < rows) hash[i] = SEED;
}

// hash_fixed folds one fixed-width key column into the running hashes.
// kind: 0 bool, 1 int8, 2 int16, 3 int32/date32, 4 int64/timestamp/decimal64,
// 5 float32, 6 float64, 7 decimal128 (16 bytes, low half first), 8 decimal32
// (hashed as the sign-extended long, as Spark hashes every decimal of
// precision <= 18). A null row leaves its hash unchanged.
extern "C" __global__ void hash_fixed(uint32_t *hash, const uint8_t *data, const uint8_t *validity,
                                      long long kind, long long rows) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows || !is_valid(validity, i)) return;
	uint32_t h = hash[i];
	switch (kind) {
	case 0:
		h = hash_int(data[i] != 0 ? 1u : 0u, h);
		break;
	case 1:
		h = hash_int((uint32_t)(int32_t)((const int8_t *)data)[i], h);
		break;
	case 2:
		h = hash_int((uint32_t)(int32_t)((const int16_t *)data)[i], h);
		break;
	case 3:
		h = hash_int(((const uint32_t *)data)[i], h);
		break;
	case 4:
		h = hash_long(((const uint64_t *)data)[i], h);
		break;
	case 5: {
		float f = ((const float *)data)[i];
		uint32_t bits = __float_as_uint(f);
		if (f == 0.0f) bits = 0;
		else if (f != f) bits = 0x7fc00000u;
		h = hash_int(bits, h);
		break;
	}
	case 6: {
		double f = ((const double *)data)[i];
		uint64_t bits = (uint64_t)__double_as_longlong(f);
		if (f == 0.0) bits = 0;
		else if (f != f) bits = 0x7ff8000000000000ull;
		h = hash_long(bits, h);
		break;
	}
	case 7: {
		const uint64_t *v = (const uint64_t *)data + 2 * i;
		h = hash_decimal128(v[0], v[1], h);
		break;
	}
	case 8:
		h = hash_long((uint64_t)(int64_t)((const int32_t *)data)[i], h);
		break;
	}
	hash[i] = h;
}

// hash_var folds one string or binary key column into the running hashes.
extern "C" __global__ void hash_var(uint32_t *hash, const int32_t *offsets, const uint8_t *chars,
                                    const uint8_t *validity, long long rows) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows || !is_valid(validity, i)) return;
	int32_t lo = offsets[i], hi = offsets[i + 1];
	hash[i] = hash_bytes(chars + lo, hi - lo, hash[i]);
}

__device__ __forceinline__ uint32_t pmod(uint32_t h, long long n) {
	int m = (int)h % (int)n;
	return (uint32_t)(m < 0 ? m + (int)n : m);
}

// partition_count turns hashes into partition ids (in place) and counts
// each tile's rows per partition: one warp owns one tile of tile_rows rows
// and its counters in shared memory; counts[p*tiles + tile] receives them,
// partition-major, so that one exclusive scan of counts yields where every
// tile's rows of every partition go.
extern "C" __global__ void partition_count(uint32_t *hash_pid, uint32_t *counts, long long rows,
                                           long long nparts, long long tile_rows, long long tiles) {
	extern __shared__ uint32_t smem[];
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	uint32_t *cnt = smem + (size_t)warp * nparts;
	long long tile = (long long)blockIdx.x * (blockDim.x / WARP) + warp;
	for (long long p = lane; p < nparts; p += WARP) cnt[p] = 0;
	__syncwarp();
	if (tile < tiles) {
		long long lo = tile * tile_rows, hi = min(lo + tile_rows, rows);
		for (long long i = lo + lane; i < hi; i += WARP) {
			uint32_t p = pmod(hash_pid[i], nparts);
			hash_pid[i] = p;
			atomicAdd(&cnt[p], 1u);
		}
	}
	__syncwarp();
	if (tile < tiles) {
		for (long long p = lane; p < nparts; p += WARP) counts[p * tiles + tile] = cnt[p];
	}
}

// partition_rank gives every row its place in partition order, keeping
// rows' relative order within a partition: dst[i] is the output row of
// input row i. base is the exclusive scan of partition_count's counts.
extern "C" __global__ void partition_rank(const uint32_t *pid, const uint32_t *base, int32_t *dst,
                                          long long rows, long long nparts, long long tile_rows,
                                          long long tiles) {
	extern __shared__ uint32_t smem[];
	int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
	uint32_t *next = smem + (size_t)warp * nparts;
	long long tile = (long long)blockIdx.x * (blockDim.x / WARP) + warp;
	if (tile >= tiles) return; // whole warps leave together
	for (long long p = lane; p < nparts; p += WARP) next[p] = base[p * tiles + tile];
	__syncwarp();
	long long lo = tile * tile_rows, hi = min(lo + tile_rows, rows);
	for (long long i0 = lo; i0 < hi; i0 += WARP) {
		long long i = i0 + lane;
		bool in = i < hi;
		uint32_t p = in ? pid[i] : 0xffffffffu;
		unsigned peers = __match_any_sync(0xffffffffu, p);
		unsigned below = peers & ((1u << lane) - 1u);
		uint32_t at = 0;
		if (in) at = next[p];
		__syncwarp();
		if (in) {
			dst[i] = (int32_t)(at + __popc(below));
			if ((peers >> lane) == 1u) next[p] = at + __popc(peers); // the highest lane of its group
		}
		__syncwarp();
	}
}

// partition_offsets reads partition p's first output row out of the
// scanned counts: offsets[p] for p < nparts, offsets[nparts] = rows.
extern "C" __global__ void partition_offsets(const uint32_t *base, long long *offsets, long long nparts,
                                             long long tiles, long long rows) {
	long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (p < nparts) offsets[p] = base[p * tiles];
	if (p == nparts) offsets[p] = rows;
}

// scatter_fixed moves every row of a fixed-width column of width bytes to
// its output row.
extern "C" __global__ void scatter_fixed(uint8_t *out, const uint8_t *in, const int32_t *dst,
                                         long long width, long long rows) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows) return;
	long long j = dst[i];
	switch (width) {
	case 1:
		out[j] = in[i];
		break;
	case 2:
		((uint16_t *)out)[j] = ((const uint16_t *)in)[i];
		break;
	case 4:
		((uint32_t *)out)[j] = ((const uint32_t *)in)[i];
		break;
	case 8:
		((uint64_t *)out)[j] = ((const uint64_t *)in)[i];
		break;
	case 16:
		((uint64_t *)out)[2 * j] = ((const uint64_t *)in)[2 * i];
		((uint64_t *)out)[2 * j + 1] = ((const uint64_t *)in)[2 * i + 1];
		break;
	default:
		for (long long b = 0; b < width; b++) out[j * width + b] = in[i * width + b];
	}
}

// scatter_validity sets the output validity bits; out (32-bit words, the
// LSB-first bitmap read as little-endian words) starts zeroed.
extern "C" __global__ void scatter_validity(uint32_t *out, const uint8_t *in, const int32_t *dst,
                                            long long rows) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= rows || !((in[i >> 3] >> (i & 7)) & 1)) return;
	long long j = dst[i];
	atomicOr(&out[j >> 5], 1u << (j & 31));
}

// scatter_lengths writes each output row's byte length at len[dst[i]];
// len has rows+1 entries, the last 0, ready for an exclusive scan into
// the output offsets.
extern "C" __global__ void scatter_lengths(int32_t *len, const int32_t *offsets, const int32_t *dst,
                                           long long rows) {
	long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
	if (i < rows) len[dst[i]] = offsets[i + 1] - offsets[i];
	if (i == rows) len[rows] = 0;
}

// scatter_chars copies each row's bytes to where the output offsets put
// them: one warp per row.
extern "C" __global__ void scatter_chars(uint8_t *out, const int32_t *out_offsets, const uint8_t *in,
                                         const int32_t *in_offsets, const int32_t *dst, long long rows) {
	long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / WARP;
	int lane = threadIdx.x % WARP;
	if (w >= rows) return;
	int32_t lo = in_offsets[w], n = in_offsets[w + 1] - lo;
	int32_t at = out_offsets[dst[w]];
	for (int32_t b = lane; b < n; b += WARP) out[at + b] = in[lo + b];
}

// Exclusive scan of n unsigned 32-bit values, in three passes: scan_reduce
// sums each tile of SCAN_TILE values, scan_tiles scans those sums in one
// block, scan_down scans each tile from its sum's prefix.

__device__ uint32_t block_exclusive_scan(uint32_t v, uint32_t *total) {
	__shared__ uint32_t warp_sums[SCAN_THREADS / WARP];
	int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
	uint32_t x = v;
	for (int d = 1; d < WARP; d <<= 1) {
		uint32_t y = __shfl_up_sync(0xffffffffu, x, d);
		if (lane >= d) x += y;
	}
	if (lane == WARP - 1) warp_sums[warp] = x;
	__syncthreads();
	if (warp == 0) {
		int nw = blockDim.x / WARP;
		uint32_t s = lane < nw ? warp_sums[lane] : 0;
		for (int d = 1; d < WARP; d <<= 1) {
			uint32_t y = __shfl_up_sync(0xffffffffu, s, d);
			if (lane >= d) s += y;
		}
		if (lane < nw) warp_sums[lane] = s;
	}
	__syncthreads();
	uint32_t before = warp > 0 ? warp_sums[warp - 1] : 0;
	*total = warp_sums[blockDim.x / WARP - 1];
	__syncthreads();
	return before + x - v;
}

extern "C" __global__ void scan_reduce(const uint32_t *in, uint32_t *tile_sums, long long n) {
	long long base = (long long)blockIdx.x * SCAN_TILE;
	uint32_t s = 0;
	for (int k = 0; k < SCAN_ITEMS; k++) {
		long long i = base + (long long)k * SCAN_THREADS + threadIdx.x;
		if (i < n) s += in[i];
	}
	uint32_t total;
	block_exclusive_scan(s, &total);
	if (threadIdx.x == 0) tile_sums[blockIdx.x] = total;
}

extern "C" __global__ void scan_tiles(uint32_t *tile_sums, long long ntiles) {
	uint32_t carry = 0;
	for (long long b = 0; b < ntiles; b += SCAN_THREADS) {
		long long i = b + threadIdx.x;
		uint32_t v = i < ntiles ? tile_sums[i] : 0;
		uint32_t total;
		uint32_t x = block_exclusive_scan(v, &total);
		if (i < ntiles) tile_sums[i] = carry + x;
		carry += total;
	}
}

extern "C" __global__ void scan_down(const uint32_t *in, uint32_t *out, const uint32_t *tile_sums,
                                     long long n) {
	long long base = (long long)blockIdx.x * SCAN_TILE + (long long)threadIdx.x * SCAN_ITEMS;
	uint32_t v[SCAN_ITEMS];
	uint32_t s = 0;
	for (int k = 0; k < SCAN_ITEMS; k++) {
		long long i = base + k;
		v[k] = i < n ? in[i] : 0;
		s += v[k];
	}
	uint32_t total;
	uint32_t x = tile_sums[blockIdx.x] + block_exclusive_scan(s, &total);
	for (int k = 0; k < SCAN_ITEMS; k++) {
		long long i = base + k;
		if (i < n) out[i] = x;
		x += v[k];
	}
}
