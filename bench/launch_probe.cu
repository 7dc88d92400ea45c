// What one launch costs on this device, apart from the bytes it moves: a plain
// copy kernel and cudaMemcpyAsync, each timed per call (CUDA events around
// every call, as `megajit bench pre-dispatch` times pre-dispatch) at N and 2N
// bytes. With t(n) = fixed + n / stream, fixed = 2 t(N) - t(2N): the cost that
// a 20-35 us pre-dispatch pays on top of its bytes, and that a 512 MB copy
// spreads thin.
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

// Median microseconds of kIters calls of op(i), each between its own events.
template <class Op> static double median_us(Op op, cudaStream_t stream) {
    std::vector<cudaEvent_t> events(2 * kIters);
    for (cudaEvent_t &e : events)
        CHECK(cudaEventCreate(&e));
    for (int i = 0; i < 5; i++)
        op(i);
    CHECK(cudaStreamSynchronize(stream));
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
    }
    for (int s = 0; s < kSets; s++) {
        CHECK(cudaFree(src[s]));
        CHECK(cudaFree(dst[s]));
    }
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
