// A CPU stand-in for the CUDA device code of ../lz4.cu, so that its
// kernels can run, unchanged, on a machine without a GPU: every thread of
// a block is a fiber (its own stack, switched with swapcontext on one OS
// thread, each running until it waits), __syncthreads is a barrier of the
// block, and the warp intrinsics (__ballot_sync, __match_any_sync,
// __shfl_sync, ...) exchange values through a barrier of the warp's 32
// threads. Fibers rather than OS threads: a barrier then costs a few
// context switches in one process instead of waking 32 threads through
// the kernel (on an idle 2-core machine the tests' CPU run took 130 s
// with threads and 31 s with fibers; with the rest of the test suite
// running beside it, the threads' run passed 10 minutes). The next fiber
// to run is drawn at random (emu_sched). It covers what lz4.cu uses,
// under the rule the kernels keep: every lane of a warp reaches every
// warp intrinsic, with the full mask. Blocks run one after another, so
// __shared__ memory is a static of the kernel.
//
// The test that builds it (gpu/emu_test.go) first rewrites `__shared__`
// to `static` (and `extern __shared__` to `extern`) and inline PTX to
// nothing; only the kernel that needs PTX (lz4_compress_smem) is left out.
#pragma once
#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
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

inline emu_dim threadIdx, blockIdx, blockDim;

// The dynamic shared memory of lz4_compress_smem, which is not run here.
inline uint4 smem[(8192 + 65536 + 64) / 16];

struct emu_barrier;

// emu_fiber is one thread of a block: its context, its stack, and its
// threadIdx, restored whenever it runs again.
struct emu_fiber {
	ucontext_t ctx;
	std::unique_ptr<char[]> stack;
	unsigned tid = 0;
	bool done = false;
	// While it waits: the barrier, and the generation it waits past.
	const emu_barrier *bar = nullptr;
	uint64_t gen = 0;
	bool runnable() const;
};

// emu_sched runs the fibers of the block being launched; main is the
// launching context. The fiber to run next is drawn at random among those
// that can run (a fixed seed, so runs repeat), so that lanes reach
// the code between two barriers in every order, as on the device: two
// lanes' writes with no barrier between them land in either order, and a
// missing barrier shows as wrong bytes.
struct emu_sched {
	std::vector<emu_fiber> fibers;
	ucontext_t main;
	unsigned cur = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	unsigned draw(unsigned n) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		return (unsigned)(rng % n);
	}
};
inline emu_sched *emu_s;

// emu_switch leaves the running fiber (done: for good) for another that
// can run, or for the launcher when every fiber has ended. A fiber
// that waits while no other can run would wait forever: a kernel whose
// lanes do not all reach a barrier. The run stops there.
inline void emu_switch(bool done) {
	emu_sched &s = *emu_s;
	unsigned me = s.cur, n = (unsigned)s.fibers.size();
	s.fibers[me].done = done;
	unsigned start = s.draw(n);
	for (unsigned k = 0; k < n; k++) {
		unsigned next = (start + k) % n;
		if (next == me || !s.fibers[next].runnable()) {
			continue;
		}
		s.cur = next;
		swapcontext(&s.fibers[me].ctx, &s.fibers[next].ctx);
		s.cur = me;
		threadIdx.x = s.fibers[me].tid;
		return;
	}
	if (!done) {
		std::fputs("emu: a thread waits at a barrier that no other thread can reach\n", stderr);
		std::abort();
	}
	setcontext(&s.main);
}

// emu_barrier holds its fibers until n have arrived.
struct emu_barrier {
	unsigned n, count = 0;
	uint64_t gen = 0;
	void wait() {
		uint64_t g = gen;
		if (++count == n) {
			count = 0;
			gen++;
			return;
		}
		emu_fiber &f = emu_s->fibers[emu_s->cur];
		f.bar = this;
		f.gen = g;
		while (gen == g) {
			emu_switch(false);
		}
		f.bar = nullptr;
	}
};

inline bool emu_fiber::runnable() const { return !done && (bar == nullptr || bar->gen != gen); }

struct emu_warp {
	emu_barrier bar{32};
	uint64_t vals[32];
};
struct emu_block {
	std::unique_ptr<emu_barrier> bar;
	std::vector<std::unique_ptr<emu_warp>> warps;
};
inline emu_block *emu_cur;

inline unsigned emu_lane() { return threadIdx.x % 32; }

// emu_exchange publishes v for the warp and returns every lane's.
inline void emu_exchange(uint64_t v, uint64_t *all) {
	emu_warp &w = *emu_cur->warps[threadIdx.x / 32];
	w.vals[emu_lane()] = v;
	w.bar.wait();
	std::memcpy(all, w.vals, sizeof w.vals);
	w.bar.wait();
}

inline void __syncthreads() { emu_cur->bar->wait(); }
inline void __syncwarp() { emu_cur->warps[threadIdx.x / 32]->bar.wait(); }

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
// after another: the block's threads (fibers) run every block in turn,
// meeting at a barrier between blocks.
struct emu_launch_args {
	unsigned grid;
	const std::function<void()> *kernel;
};
inline emu_launch_args emu_args;

inline void emu_fiber_main() {
	emu_sched &s = *emu_s;
	threadIdx.x = s.fibers[s.cur].tid;
	for (unsigned b = 0; b < emu_args.grid; b++) {
		blockIdx.x = b;
		(*emu_args.kernel)();
		emu_cur->bar->wait();
	}
	emu_switch(true);
}

inline void emu_launch(unsigned grid, unsigned block, const std::function<void()> &kernel) {
	constexpr size_t stack = 256 << 10;
	emu_block blk;
	blk.bar = std::make_unique<emu_barrier>(emu_barrier{block});
	for (unsigned w = 0; w < (block + 31) / 32; w++) {
		blk.warps.push_back(std::make_unique<emu_warp>());
	}
	emu_sched s;
	s.fibers.resize(block);
	for (unsigned t = 0; t < block; t++) {
		emu_fiber &f = s.fibers[t];
		f.tid = t;
		f.stack.reset(new char[stack]);
		if (getcontext(&f.ctx) != 0) {
			std::abort();
		}
		f.ctx.uc_stack.ss_sp = f.stack.get();
		f.ctx.uc_stack.ss_size = stack;
		f.ctx.uc_link = nullptr;
		makecontext(&f.ctx, emu_fiber_main, 0);
	}
	emu_s = &s;
	emu_cur = &blk;
	emu_args = {grid, &kernel};
	blockDim.x = block;
	s.cur = 0;
	swapcontext(&s.main, &s.fibers[0].ctx);
	emu_s = nullptr;
}
