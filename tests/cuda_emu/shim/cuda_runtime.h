// The emulated CUDA device: the part of the CUDA language and runtime that csrc/*.cu use, for
// compiling them as host C++ (tests/cuda_emu/README.md). Device memory is host memory (CPU
// tensors), a launch runs its blocks one after another in the order emu::settings() asks for, and
// a block's threads run as coroutines that switch at __syncthreads() (emulator.cpp), so a barrier
// is honoured, and one that not every thread reaches is an error.
#pragma once

#include <c10/util/Exception.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <utility>

// ---- the language --------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Blocks run one at a time, so one static variable serves every block; all of them sit in one
// section, which the emulator fills with garbage before each block (a read before the write and
// barrier that should precede it then sees nonsense, as it may on a GPU).
#define __shared__ __attribute__((section("emu_shared"))) static

struct uint3 { unsigned int x = 0, y = 0, z = 0; };
struct dim3 {
  unsigned int x, y, z;
  dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
};
// The vector types keep CUDA's alignment: UBSan reports a load from a misaligned one.
struct alignas(16) uint4 { unsigned int x, y, z, w; };
struct alignas(8) uint2 { unsigned int x, y; };

extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
void __syncthreads();

// The __*_rn intrinsics round each operation on its own; the emulator is compiled with
// -ffp-contract=off, so plain operations do the same.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
using std::nearbyint;

// ---- the runtime ---------------------------------------------------------------------------
// Streams are distinct objects (emulator.cpp): a launch must go to the current one.
typedef struct CUstream_st* cudaStream_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUuserObject_st* cudaUserObject_t;
typedef void (*cudaHostFn_t)(void*);
#define CUDART_CB
enum cudaUserObjectFlags { cudaUserObjectNoDestructorSync = 1 };
enum cudaUserObjectRetainFlags { cudaGraphUserObjectMove = 1 };
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidConfiguration = 9 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                     unsigned long long* id = nullptr, cudaGraph_t* graph = nullptr);
// A graph owns its user objects: the emulator calls `destroy(pointer)` when the graph is reset.
cudaError_t cudaUserObjectCreate(cudaUserObject_t* object, void* pointer, cudaHostFn_t destroy,
                                 unsigned int count, unsigned int flags);
cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                      unsigned int flags);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int device);
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* kernel,
                                                          int threads, size_t shared_bytes);
template <typename... P>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, void (*kernel)(P...),
                                                          int threads, size_t shared_bytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      blocks, reinterpret_cast<const void*>(kernel), threads, shared_bytes);
}
cudaError_t cudaGetLastError();
const char* cudaGetErrorString(cudaError_t error);

namespace emu {

// The current stream (Emulated.set_stream() chooses it).
cudaStream_t current_stream();

// Runs (or, while a capture is on, records) a launch of `body` on `grid` blocks of `threads`;
// `name` says which kernel in the launch log and in errors. A launch on another stream than the
// current one is an error: every launch of minimm goes to the current stream.
void launch(std::string name, cudaStream_t stream, dim3 grid, dim3 threads, std::function<void()> body);

// The kernel's name from the signature of launch_of<Kernel>: "... [with auto Kernel = NAME; ...]".
std::string kernel_name(const char* signature);

// The arguments are copied when the launch is made, as a GPU launch copies them.
template <auto Kernel, typename... P, typename... A>
void launch_of(void (*)(P...), cudaStream_t stream, dim3 grid, dim3 threads, A&&... args) {
  std::tuple<std::decay_t<P>...> values(std::forward<A>(args)...);
  launch(kernel_name(__PRETTY_FUNCTION__), stream, grid, threads, [values] { std::apply(Kernel, values); });
}

}  // namespace emu

// What csrc/multi_tensor_apply.cuh launches with: the emulator instead of <<<>>>, and plain host
// memory to stage tables in (there is no driver to pin memory with).
#define MINIMM_LAUNCH(kernel, grid, threads, stream, ...) \
  ::emu::launch_of<kernel>(kernel, stream, grid, threads, __VA_ARGS__)
#define MINIMM_PINNED_STAGING false
