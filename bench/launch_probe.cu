// What one launch costs on this device, apart from the bytes it moves: a plain
// copy kernel and cudaMemcpyAsync, each timed per call (CUDA events around
// every call, as `megajit bench pre-dispatch` times pre-dispatch) at N and 2N
// bytes. With t(n) = fixed + n / stream, fixed = 2 t(N) - t(2N): the cost that
// a pre-dispatch launch (its times are in bench/RESULTS.md) pays on top of its
// bytes, and that a 512 MB copy spreads thin. Then kernels that only move
// pre-dispatch's byte mixes (read N, write N, N/2 or N/4) in one launch, as a
// fraction of the memcpy bandwidth, and the floor with no work at all: an
// empty kernel, and an empty pair chained by PDL (pre-dispatch's check + main
// kernel shape).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -o build/bench/launch_probe bench/launch_probe.cu
//   build/bench/launch_probe [N_MiB]      (N defaults to T=4096 x H=7168 BF16, 56 MiB)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                     \
                         cudaGetErrorString(err_));                                                \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

constexpr int kThreads = 224, kCtasPerSm = 4, kBatch = 8, kIters = 200, kSets = 4;
// More than the host needs to enqueue one launch of the empty-launch table.
constexpr long long kLeadNsPerLaunch = 25000;

// The pre-dispatch BF16 path's copy loop without the rest: 16-byte chunks with a
// grid stride, kBatch loads in flight per thread.
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    copy_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, long long chunks) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < chunks;
         i += kBatch * stride) {
        uint4 batch[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; j++)
            if (i + j * stride < chunks) batch[j] = src[i + j * stride];
#pragma unroll
        for (int j = 0; j < kBatch; j++)
            if (i + j * stride < chunks) dst[i + j * stride] = batch[j];
    }
}

// Reads kFold 16-byte chunks per chunk it writes (XOR-folded, so nothing is
// elided): the byte mix of a quantizer that writes 1/kFold of what it reads,
// with no arithmetic to speak of; kBatch loads in flight per thread.
template <int kFold>
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    fold_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, long long out_chunks) {
    constexpr int kOut = kBatch / kFold;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < out_chunks;
         i += kOut * stride) {
        uint4 in[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; j++) {
            const long long o = i + (j / kFold) * stride;
            if (o < out_chunks) in[j] = src[o * kFold + j % kFold];
        }
#pragma unroll
        for (int k = 0; k < kOut; k++) {
            const long long o = i + k * stride;
            if (o >= out_chunks) continue;
            uint4 v = in[k * kFold];
#pragma unroll
            for (int f = 1; f < kFold; f++) {
                v.x ^= in[k * kFold + f].x;
                v.y ^= in[k * kFold + f].y;
                v.z ^= in[k * kFold + f].z;
                v.w ^= in[k * kFold + f].w;
            }
            dst[o] = v;
        }
    }
}

// Kernels that do nothing but the PDL handshake, for the floor of a launch:
// the primary lets its dependent start at once, the dependent waits for it.
__global__ void primary_kernel() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__global__ void dependent_kernel() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Keeps the GPU busy for ns nanoseconds, so that launches enqueued behind it
// are timed on the GPU, not at the host's enqueue rate.
__global__ void spin_kernel(long long ns) {
    long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    while (now - start < ns);
}

// Median microseconds of kIters calls of op(i), each between its own events;
// lead_ns > 0 queues them behind a spin of that length.
template <class Op> static double median_us(Op op, cudaStream_t stream, long long lead_ns = 0) {
    std::vector<cudaEvent_t> events(2 * kIters);
    for (cudaEvent_t &e : events)
        CHECK(cudaEventCreate(&e));
    for (int i = 0; i < 5; i++)
        op(i);
    CHECK(cudaStreamSynchronize(stream));
    if (lead_ns > 0) {
        spin_kernel<<<1, 1, 0, stream>>>(lead_ns);
        CHECK(cudaGetLastError());
    }
    for (int i = 0; i < kIters; i++) {
        CHECK(cudaEventRecord(events[2 * i], stream));
        op(i);
        CHECK(cudaEventRecord(events[2 * i + 1], stream));
    }
    CHECK(cudaStreamSynchronize(stream));
    std::vector<float> ms(kIters);
    for (int i = 0; i < kIters; i++)
        CHECK(cudaEventElapsedTime(&ms[i], events[2 * i], events[2 * i + 1]));
    for (cudaEvent_t e : events)
        CHECK(cudaEventDestroy(e));
    std::sort(ms.begin(), ms.end());
    return ms[kIters / 2] * 1e3;
}

int main(int argc, char **argv) {
    const long mib = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 0;
    if (argc > 2 || (argc == 2 && (mib < 1 || mib > 16384))) {
        std::fprintf(stderr, "usage: %s [N_MiB]   (1 to 16384; default 56)\n", argv[0]);
        return 2;
    }
    const size_t n = argc > 1 ? (size_t)mib << 20 : 4096ull * 7168 * 2;
    int device = 0, sms = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // kSets source/destination pairs of 2N bytes, rotated so no call finds its
    // data in the L2.
    std::vector<char *> src(kSets), dst(kSets);
    for (int s = 0; s < kSets; s++) {
        CHECK(cudaMalloc(&src[s], 2 * n));
        CHECK(cudaMalloc(&dst[s], 2 * n));
        CHECK(cudaMemset(src[s], 0x5a + s, 2 * n));
        CHECK(cudaMemset(dst[s], 0, 2 * n));
    }
    const int grid = sms * kCtasPerSm;
    std::printf("%-22s %10s %12s %12s %14s %14s\n", "METHOD", "N MIB", "T(N) US", "T(2N) US",
                "FIXED US", "STREAM GB/S");
    double memcpy_gbps = 0.0;
    for (int method = 0; method < 2; method++) {
        double t[2];
        for (int k = 0; k < 2; k++) {
            const size_t bytes = n << k;
            t[k] = median_us(
                [&](int i) {
                    const int s = i % kSets;
                    if (method == 0) {
                        copy_kernel<<<grid, kThreads, 0, stream>>>(
                            reinterpret_cast<const uint4 *>(src[s]),
                            reinterpret_cast<uint4 *>(dst[s]), (long long)(bytes / 16));
                        CHECK(cudaGetLastError());
                    } else {
                        CHECK(cudaMemcpyAsync(dst[s], src[s], bytes, cudaMemcpyDeviceToDevice,
                                              stream));
                    }
                },
                stream);
        }
        // Read + written bytes of the extra N over the extra time.
        std::printf("%-22s %10.1f %12.2f %12.2f %14.2f %14.0f\n",
                    method == 0 ? "copy kernel" : "cudaMemcpyAsync", n / 1048576.0, t[0], t[1],
                    2 * t[0] - t[1], 2.0 * n / ((t[1] - t[0]) * 1e3));
        if (method == 1) memcpy_gbps = 2.0 * n / ((t[1] - t[0]) * 1e3);
    }

    // The best a one-launch kernel with pre-dispatch's byte mix can show by the
    // bench's measure (bytes over one launch's event time, against the copy
    // bandwidth with its fixed cost spread thin): N read, N / fold written.
    std::printf("\n%-34s %10s %10s %10s %14s\n", "MOVE ONLY (one launch, N read)", "WRITE MIB",
                "US", "GB/S", "% OF MEMCPY");
    for (int fold = 1; fold <= 4; fold *= 2) {
        const long long out_chunks = (long long)(n / 16 / fold);
        const double us = median_us(
            [&](int i) {
                const int s = i % kSets;
                const uint4 *from = reinterpret_cast<const uint4 *>(src[s]);
                uint4 *to = reinterpret_cast<uint4 *>(dst[s]);
                if (fold == 1)
                    fold_kernel<1><<<grid, kThreads, 0, stream>>>(from, to, out_chunks);
                else if (fold == 2)
                    fold_kernel<2><<<grid, kThreads, 0, stream>>>(from, to, out_chunks);
                else
                    fold_kernel<4><<<grid, kThreads, 0, stream>>>(from, to, out_chunks);
                CHECK(cudaGetLastError());
            },
            stream);
        const double gbps = (n + n / fold) / (us * 1e3);
        std::printf("%-34s %10.1f %10.2f %10.0f %13.1f%%\n",
                    fold == 1   ? "write N (BF16's mix)"
                    : fold == 2 ? "write N/2 (MXFP8's)"
                                : "write N/4 (4-bit formats')",
                    n / fold / 1048576.0, us, gbps, 100.0 * gbps / memcpy_gbps);
    }
    for (int s = 0; s < kSets; s++) {
        CHECK(cudaFree(src[s]));
        CHECK(cudaFree(dst[s]));
    }

    // What pre-dispatch's shape of launch costs with no work at all: one
    // kernel, and two chained by PDL as its check and main kernels are.
    cudaLaunchAttribute pdl;
    pdl.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    pdl.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t one = {};
    one.gridDim = dim3(1);
    one.blockDim = dim3(256);
    one.stream = stream;
    one.attrs = &pdl;
    one.numAttrs = 1;
    cudaLaunchConfig_t dependent = one;
    dependent.gridDim = dim3(grid);
    dependent.blockDim = dim3(kThreads);
    const long long lead_ns = kIters * kLeadNsPerLaunch;
    const double single = median_us(
        [&](int) { CHECK(cudaLaunchKernelEx(&dependent, dependent_kernel)); }, stream, lead_ns);
    const double pair = median_us(
        [&](int) {
            CHECK(cudaLaunchKernelEx(&one, primary_kernel));
            CHECK(cudaLaunchKernelEx(&dependent, dependent_kernel));
        },
        stream, lead_ns);
    std::printf("\n%-44s %10s\n", "EMPTY LAUNCH (queued behind a spin kernel)", "US");
    std::printf("%-44s %10.2f\n", "one kernel, grid of the copy kernel", single);
    std::printf("%-44s %10.2f\n", "1-CTA kernel + that kernel as its PDL dependent", pair);
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
