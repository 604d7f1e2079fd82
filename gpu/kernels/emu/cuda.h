// A CPU stand-in for the CUDA device code of ../lz4.cu, so that its
// kernels can run, unchanged, on a machine without a GPU: every thread of
// a block is an OS thread, __syncthreads is a barrier of the block, and
// the warp intrinsics (__ballot_sync, __match_any_sync, __shfl_sync, ...)
// exchange values through a barrier of the warp's 32 threads. It covers
// what lz4.cu uses, under the rule the kernels keep: every lane of a warp
// reaches every warp intrinsic, with the full mask. Blocks run one after
// another, so __shared__ memory is a static of the kernel.
//
// The test that builds it (gpu/emu_test.go) first rewrites `__shared__`
// to `static` (and `extern __shared__` to `extern`) and inline PTX to
// nothing; only the kernel that needs PTX (lz4_compress_smem) is left out.
#pragma once
#include <barrier>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define EMU_ASM(...) ((void)0)

struct emu_dim {
	unsigned x = 0, y = 0, z = 0;
};
struct uint4 {
	unsigned x, y, z, w;
};

struct emu_warp {
	std::barrier<> bar{32};
	uint64_t vals[32];
};
struct emu_block {
	std::unique_ptr<std::barrier<>> bar;
	std::vector<std::unique_ptr<emu_warp>> warps;
};

inline thread_local emu_dim threadIdx, blockIdx, blockDim;

// The dynamic shared memory of lz4_compress_smem, which is not run here.
inline uint4 smem[(8192 + 65536 + 64) / 16];
inline thread_local emu_block *emu_cur;

inline unsigned emu_lane() { return threadIdx.x % 32; }

// emu_exchange publishes v for the warp and returns every lane's.
inline void emu_exchange(uint64_t v, uint64_t *all) {
	emu_warp &w = *emu_cur->warps[threadIdx.x / 32];
	w.vals[emu_lane()] = v;
	w.bar.arrive_and_wait();
	std::memcpy(all, w.vals, sizeof w.vals);
	w.bar.arrive_and_wait();
}

inline void __syncthreads() { emu_cur->bar->arrive_and_wait(); }
inline void __syncwarp() { emu_cur->warps[threadIdx.x / 32]->bar.arrive_and_wait(); }

inline unsigned __ballot_sync(unsigned, int pred) {
	uint64_t all[32];
	emu_exchange(pred != 0, all);
	unsigned m = 0;
	for (int k = 0; k < 32; k++) {
		m |= (all[k] ? 1u : 0u) << k;
	}
	return m;
}

inline unsigned __match_any_sync(unsigned, unsigned v) {
	uint64_t all[32];
	emu_exchange(v, all);
	unsigned m = 0;
	for (int k = 0; k < 32; k++) {
		m |= (all[k] == v ? 1u : 0u) << k;
	}
	return m;
}

template <class T> T emu_from(uint64_t u) {
	T v;
	std::memcpy(&v, &u, sizeof v);
	return v;
}
template <class T> uint64_t emu_to(T v) {
	static_assert(sizeof(T) <= 8);
	uint64_t u = 0;
	std::memcpy(&u, &v, sizeof v);
	return u;
}

// __shfl_sync: a source lane outside [0, 32) wraps, as on the device.
template <class T> T __shfl_sync(unsigned, T v, int src) {
	uint64_t all[32];
	emu_exchange(emu_to(v), all);
	return emu_from<T>(all[src & 31]);
}

template <class T> T __shfl_down_sync(unsigned, T v, unsigned delta) {
	uint64_t all[32];
	emu_exchange(emu_to(v), all);
	unsigned src = emu_lane() + delta;
	return src < 32 ? emu_from<T>(all[src]) : v;
}

inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
	return (unsigned)((((uint64_t)hi << 32) | lo) >> (shift & 31));
}

template <class A, class B> inline std::common_type_t<A, B> min(A a, B b) {
	using C = std::common_type_t<A, B>;
	return (C)a < (C)b ? (C)a : (C)b;
}

// emu_launch runs kernel over grid blocks of block threads, one block
// after another: the block's threads (OS threads) run every block in
// turn, meeting at a barrier between blocks.
inline void emu_launch(unsigned grid, unsigned block, const std::function<void()> &kernel) {
	emu_block blk;
	blk.bar = std::make_unique<std::barrier<>>(block);
	for (unsigned w = 0; w < (block + 31) / 32; w++) {
		blk.warps.push_back(std::make_unique<emu_warp>());
	}
	std::vector<std::thread> ts;
	for (unsigned t = 0; t < block; t++) {
		ts.emplace_back([&, t] {
			threadIdx.x = t;
			blockDim.x = block;
			emu_cur = &blk;
			for (unsigned b = 0; b < grid; b++) {
				blockIdx.x = b;
				kernel();
				blk.bar->arrive_and_wait();
			}
		});
	}
	for (auto &t : ts) {
		t.join();
	}
}
