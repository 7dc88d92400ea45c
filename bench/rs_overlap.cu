/*
 * Does integer work of one warpgroup overlap the wgmmas of another on the same
 * SM? The BF16-kind K loops decode E2M1 weights with integer instructions and
 * feed them to wgmma from registers (RS). This kernel times the two parts
 * alone and together, with A from registers (RS) and from shared memory (SS),
 * on every SM (one CTA of 256 threads each):
 *
 *   tensor: warpgroup 0 issues `steps` rounds of two m64nNk16 BF16 wgmmas
 *           (two accumulator sets, as a K loop's two blocks), waiting each
 *           round for the one before it (wait_group 1), as mainloop_bf16 does
 *   alu:    warpgroup 1 runs `steps` rounds of kAluOps dependence-free
 *           integer instructions a thread (eight chains of SHF and LOP3)
 *   both:   the two at once
 *   tensor on both warpgroups: warpgroup 1 issues the same wgmmas as
 *           warpgroup 0 (twice the work: the rate two issuing warpgroups reach)
 *
 * The data is garbage (timing only). `make test-gpu` builds it
 * (build/bench/rs_overlap); it prints, per N and operand source, ns a round
 * for tensor, alu and both, (both - max) / min (0: the shorter part hides
 * under the longer; 1: the two add up) and the two-warpgroup round.
 */
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "common/wgmma_ops.cuh"

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

constexpr int kAluOps = 48; // a BF16-kind decode step's instructions a thread (two blocks)
constexpr int kSmem = 64 * 1024;

__device__ __forceinline__ mj_u64 desc_of(const void *p) {
    // No swizzle; leading / stride byte offsets of one core matrix. Garbage
    // data is fine: only the timing matters.
    const unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    return (mj_u64)((addr & 0x3FFFF) >> 4) | (mj_u64)(128 >> 4) << 16 | (mj_u64)(256 >> 4) << 32;
}

/* SS: A and B from shared memory (RS uses the kernels' own mj::WgmmaRs). */
template <int N> __device__ __forceinline__ void mma_ss(float *d, mj_u64 da, mj_u64 db);

#define ACC8(i)                                                                                    \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]),    \
        "+f"(d[i + 6]), "+f"(d[i + 7])

template <> __device__ __forceinline__ void mma_ss<8>(float *d, mj_u64 da, mj_u64 db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, "
                 "%4, %5, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(da), "l"(db));
}
template <> __device__ __forceinline__ void mma_ss<48>(float *d, mj_u64 da, mj_u64 db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,"
                 "%22,%23}, %24, %25, 1, 1, 1, 0, 0;\n"
                 : ACC8(0), ACC8(8), ACC8(16)
                 : "l"(da), "l"(db));
}
template <> __device__ __forceinline__ void mma_ss<128>(float *d, mj_u64 da, mj_u64 db) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,"
                 "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,"
                 "%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,"
                 "%62,%63}, %64, %65, 1, 1, 1, 0, 0;\n"
                 : ACC8(0), ACC8(8), ACC8(16), ACC8(24), ACC8(32), ACC8(40), ACC8(48), ACC8(56)
                 : "l"(da), "l"(db));
}

enum { kTensor = 1, kAlu = 2 };

/* kBoth: every warpgroup issues the wgmmas (parts = kTensor). The roles are
 * one if / else on the warpgroup: with the part flags in the same condition
 * ptxas serialized the N = 128 RS wgmmas (C7520, a wait after each), which a
 * first run of this kernel measured as a slow RS rate. Its make rule
 * refuses a build where ptxas reports one. */
template <int N, bool kSS, bool kBoth>
__global__ void __launch_bounds__(256, 1) overlap(int parts, int steps, unsigned *sink) {
    extern __shared__ __align__(1024) unsigned char smem[];
    const int wg = threadIdx.x / 128;
    if (kBoth ? (parts & kTensor) != 0 : wg == 0) {
        if (!(parts & kTensor)) return;
        float d0[N / 2], d1[N / 2];
#pragma unroll
        for (int i = 0; i < N / 2; i++)
            d0[i] = d1[i] = 0.0f;
        mj_u32 a0[4], a1[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            a0[i] = threadIdx.x * 0x00010001u + i;
            a1[i] = a0[i] ^ 0x3F803F80u;
        }
        const mj_u64 db = desc_of(smem), da0 = desc_of(smem + 16384), da1 = desc_of(smem + 32768);
        for (int s = 0; s < steps; s++) {
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
            if constexpr (kSS) {
                mma_ss<N>(d0, da0, db);
                mma_ss<N>(d1, da1, db);
            } else {
                mj::WgmmaRs<mj::MmaBF16, N>::mma(d0, a0, db);
                mj::WgmmaRs<mj::MmaBF16, N>::mma(d1, a1, db);
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < N / 2; i++)
            acc += d0[i] + d1[i];
        if (acc == 1234.5f) sink[blockIdx.x] = 1u; // keeps the wgmmas
    } else {
        if (!(parts & kAlu)) return;
        unsigned r[8];
        for (int i = 0; i < 8; i++)
            r[i] = threadIdx.x * 2654435761u + i;
        for (int s = 0; s < steps; s++) {
#pragma unroll
            for (int j = 0; j < kAluOps / 16; j++) {
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    asm volatile("shf.l.wrap.b32 %0, %0, %0, 3;" : "+r"(r[i]));
                    asm volatile("lop3.b32 %0, %0, 0x81C081C0, 0x12345678, 0x6A;" : "+r"(r[i]));
                }
            }
        }
        unsigned x = 0;
        for (int i = 0; i < 8; i++)
            x ^= r[i];
        if (x == 0x12345u) sink[blockIdx.x] = x;
    }
}

template <int N, bool kSS, bool kBoth> static float time_round(int parts, int sms, unsigned *sink) {
    auto kern = overlap<N, kSS, kBoth>;
    CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    const int steps = 20000;
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    kern<<<sms, 256, kSmem>>>(parts, steps / 10, sink); // warm-up
    CHECK(cudaGetLastError());
    float best = 1e30f;
    for (int rep = 0; rep < 5; rep++) {
        CHECK(cudaEventRecord(e0));
        kern<<<sms, 256, kSmem>>>(parts, steps, sink);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    CHECK(cudaEventDestroy(e0));
    CHECK(cudaEventDestroy(e1));
    return best * 1e6f / steps;
}

template <int N, bool kSS> static void measure(int sms, unsigned *sink) {
    const float tensor = time_round<N, kSS, false>(kTensor, sms, sink),
                alu = time_round<N, kSS, false>(kAlu, sms, sink),
                both = time_round<N, kSS, false>(kTensor | kAlu, sms, sink),
                two = time_round<N, kSS, true>(kTensor, sms, sink);
    const float hi = tensor > alu ? tensor : alu, lo = tensor > alu ? alu : tensor;
    printf("%-3s N=%-3d  tensor %6.2f ns  alu %6.2f ns  both %6.2f ns  serialized %.2f  "
           "tensor on both warpgroups %6.2f ns\n",
           kSS ? "SS" : "RS", N, tensor, alu, both, (both - hi) / lo, two);
}

int main() {
    int dev = 0, sms = 0, clock_khz = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    printf("%s, %d SMs; a round = two m64nNk16 BF16 wgmmas (warpgroup 0) and %d integer "
           "instructions a thread (warpgroup 1)\n",
           prop.name, sms, kAluOps);
    unsigned *sink;
    CHECK(cudaMalloc(&sink, sms * sizeof(unsigned)));
    measure<8, false>(sms, sink);
    measure<8, true>(sms, sink);
    measure<48, false>(sms, sink);
    measure<48, true>(sms, sink);
    measure<128, false>(sms, sink);
    measure<128, true>(sms, sink);
    CHECK(cudaFree(sink));
    return 0;
}
