//! The emulated device: a C++ header under which generated CUDA source
//! compiles with the host compiler and runs on the CPU, so that every line
//! of the device path runs in CI.
//!
//! Each block's threads run as fibers on the launching OS thread (the
//! emulator's state is per thread, so concurrent launches are independent); `__syncthreads()`
//! is a real barrier (a fiber yields to the block's scheduler, which resumes
//! every fiber once all have arrived). Fibers switch with a few instructions
//! on x86-64 (glibc's `swapcontext` makes a system call per switch, far too
//! slow for barrier-heavy kernels), and through `swapcontext` elsewhere.
//! Shared memory is a per-block buffer; atomics are plain read-modify-write
//! (fibers never interleave inside one). Fiber stacks are the caller's,
//! each with a guard page below it, sized by the caller (the runtime
//! derives the size from the loop's locals and the kernel's frame), so a
//! large local array or reduction runs instead of overwriting the next
//! fiber's stack; the runtime keeps them per OS thread across launches.

/// The header, to be placed before generated source.
pub const EMU_HEADER: &str = r#"// parloop emulated device: CUDA C++ on the host.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct pl_dim3 { unsigned int x, y, z; };
/* Per OS thread: launches on different threads are independent. */
static thread_local pl_dim3 threadIdx, blockIdx, blockDim, gridDim;
static thread_local char* pl_emu_shared;
#define PL_SHARED(type, name) type* name = (type*)pl_emu_shared

template <class T> static inline T atomicAdd(T* p, T v) { T old = *p; *p = old + v; return old; }
template <class T> static inline T atomicMin(T* p, T v) { T old = *p; if (v < old) *p = v; return old; }
template <class T> static inline T atomicMax(T* p, T v) { T old = *p; if (v > old) *p = v; return old; }
template <class T> static inline T atomicCAS(T* p, T cmp, T v) { T old = *p; if (old == cmp) *p = v; return old; }
static inline void __threadfence() {}

/* ---- fibers ---- */
struct pl_fiber {
    void* sp;
    char* stack;
    int done;
    int waiting;
#if !defined(__x86_64__)
    ucontext_t ctx;
#endif
};
static thread_local pl_fiber* pl_fibers;
static thread_local unsigned int pl_nfibers;
static thread_local unsigned int pl_current;
static thread_local void* pl_sched_sp;
#if !defined(__x86_64__)
static thread_local ucontext_t pl_sched_ctx;
#endif
static thread_local void (*pl_body)(const void*);
static thread_local const void* pl_body_args;
/* Usable bytes of each fiber's stack (a guard page lies below each). */
static thread_local size_t pl_stack_bytes;

#if defined(__x86_64__)
extern "C" void pl_ctx_switch(void** from_sp, void* to_sp);
__asm__(
    ".text\n"
    "pl_ctx_switch:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n");
#endif

static void pl_to_scheduler() {
#if defined(__x86_64__)
    pl_ctx_switch(&pl_fibers[pl_current].sp, pl_sched_sp);
#else
    swapcontext(&pl_fibers[pl_current].ctx, &pl_sched_ctx);
#endif
}

static void pl_fiber_main() {
    pl_body(pl_body_args);
    pl_fibers[pl_current].done = 1;
    pl_to_scheduler();
    abort(); /* a finished fiber is never resumed */
}

static void __syncthreads() {
    pl_fibers[pl_current].waiting = 1;
    pl_to_scheduler();
}

static void pl_start_fiber(unsigned int t) {
    pl_fiber* f = &pl_fibers[t];
    f->done = 0;
    f->waiting = 0;
#if defined(__x86_64__)
    /* Stack top: a zero return slot, the entry address, six callee-saved
       registers; `ret` then enters pl_fiber_main with rsp = 8 (mod 16). */
    uintptr_t top = ((uintptr_t)(f->stack + pl_stack_bytes)) & ~(uintptr_t)15;
    void** sp = (void**)top;
    *--sp = 0;
    *--sp = (void*)&pl_fiber_main;
    for (int i = 0; i < 6; ++i) *--sp = 0;
    f->sp = sp;
#else
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = pl_stack_bytes;
    f->ctx.uc_link = 0;
    makecontext(&f->ctx, (void (*)())pl_fiber_main, 0);
#endif
}

static void pl_resume(unsigned int t) {
    pl_current = t;
    threadIdx.x = t;
#if defined(__x86_64__)
    pl_ctx_switch(&pl_sched_sp, pl_fibers[t].sp);
#else
    swapcontext(&pl_sched_ctx, &pl_fibers[t].ctx);
#endif
}

static void pl_free_fibers() {
    free(pl_fibers);
    pl_fibers = 0;
    pl_nfibers = 0;
}

/* Runs `body(args)` for every thread of every block, one block at a time,
   thread t on the stack above `stacks[t]` (`stack_bytes` usable bytes, a
   guard page below). The stacks are the caller's: kept per OS thread
   across launches and modules, they cost no system call per launch. */
extern "C" int pl_emu_launch(void (*body)(const void*), const void* args, unsigned int grid,
                             unsigned int block, size_t shared_bytes, char* const* stacks, size_t stack_bytes) {
    if (block == 0 || block > 1024) return 1;
    pl_free_fibers();
    pl_fibers = (pl_fiber*)calloc(block, sizeof(pl_fiber));
    if (!pl_fibers) return 2;
    pl_nfibers = block;
    pl_stack_bytes = stack_bytes;
    for (unsigned int t = 0; t < block; ++t) pl_fibers[t].stack = stacks[t];
    /* A canary after the shared memory: a block that writes past the size
       the launch asked for fails the launch instead of corrupting memory. */
    const size_t canary = 64;
    char* shared = (char*)malloc(shared_bytes + canary);
    if (!shared) { pl_free_fibers(); return 2; }
    pl_emu_shared = shared;
    pl_body = body;
    pl_body_args = args;
    blockDim.x = block; blockDim.y = 1; blockDim.z = 1;
    gridDim.x = grid; gridDim.y = 1; gridDim.z = 1;
    threadIdx.y = 0; threadIdx.z = 0;
    blockIdx.y = 0; blockIdx.z = 0;
    for (unsigned int b = 0; b < grid; ++b) {
        blockIdx.x = b;
        memset(shared, 0xA5, shared_bytes + canary); /* garbage, as on a GPU */
        for (unsigned int t = 0; t < block; ++t) pl_start_fiber(t);
        unsigned int finished = 0;
        while (finished < block) {
            /* One round: every live fiber runs to its next barrier or its end. */
            finished = 0;
            for (unsigned int t = 0; t < block; ++t) {
                if (!pl_fibers[t].done) {
                    pl_fibers[t].waiting = 0;
                    pl_resume(t);
                }
                finished += pl_fibers[t].done;
            }
        }
        for (size_t i = 0; i < canary; ++i) {
            if ((unsigned char)shared[shared_bytes + i] != 0xA5) { free(shared); pl_free_fibers(); return 3; }
        }
    }
    free(shared);
    pl_free_fibers();
    return 0;
}
"#;
