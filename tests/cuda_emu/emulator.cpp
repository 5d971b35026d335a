// The emulated device's engine: launches, the threads of a block, captured graphs, and the ops
// that let the Python tests steer it (torch.ops.minimm_emu.*, see device.py).
//
// A block's threads are coroutines (ucontext) on one OS thread. The scheduler runs each thread
// until it reaches a __syncthreads() or returns, in the order the settings ask for (forward,
// reverse or shuffled), and releases a barrier only when every thread waits at it; a barrier
// that some threads reach while others returned, or a different count of barriers, is what a GPU
// leaves undefined, and is an error here. Blocks run one after another, in their own order.
#include <torch/library.h>
#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <vector>

#include "ema.h"
#include "pack.h"
#include "shim/cuda_runtime.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
struct CUstream_st {};
// A user object: what a graph calls at its end (cudaUserObjectCreate).
struct CUuserObject_st {
  void* pointer;
  cudaHostFn_t destroy;
};

// The __shared__ variables (cuda_runtime.h puts them in this section).
extern char __start_emu_shared[] __attribute__((weak));
extern char __stop_emu_shared[] __attribute__((weak));

namespace emu {
namespace {

enum Order : int64_t { kForward = 0, kReverse = 1, kShuffled = 2 };

struct Settings {
  int64_t block_order = kForward, thread_order = kForward, sms = 2, blocks_per_sm = 4;
  std::mt19937 random{1};
};
Settings settings;

struct Launch {
  std::string name;
  dim3 grid, threads;
  std::function<void()> body;
};
struct Graph {
  std::vector<Launch> launches;
  std::vector<std::unique_ptr<CUuserObject_st>> objects;  // destroyed with the graph
};
constexpr int64_t kStreams = 8;
CUstream_st streams[kStreams];
int64_t current_index = 0;             // which of `streams` is current
bool capturing = false;
cudaStream_t capture_stream = nullptr;  // the stream being captured
Graph recording;
std::vector<Graph> graphs;              // captured graphs, by id
std::vector<std::string> log;           // "name grid threads" of every launch run

int64_t stream_index(cudaStream_t stream) {
  for (int64_t k = 0; k < kStreams; ++k)
    if (stream == &streams[k]) return k;
  return -1;
}

// ---- a block's threads as coroutines -------------------------------------------------------
enum State { kRunning, kAtBarrier, kDone };
struct Thread {
  ucontext_t context;
  std::unique_ptr<char[]> stack;
  State state = kRunning;
  int64_t barriers = 0;
};
constexpr size_t kStackBytes = 128 * 1024;
std::vector<Thread> threads;
Thread* current = nullptr;
ucontext_t scheduler;
const std::function<void()>* body = nullptr;
std::exception_ptr failure;
#if defined(__SANITIZE_ADDRESS__)
const void* scheduler_stack = nullptr;
size_t scheduler_stack_bytes = 0;
#endif

// AddressSanitizer must be told about every switch between stacks.
void switch_to(ucontext_t* from, ucontext_t* to, const void* to_stack, size_t to_bytes) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, to_stack, to_bytes);
  swapcontext(from, to);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  (void)to_stack, (void)to_bytes;
  swapcontext(from, to);
#endif
}

void to_scheduler() {
#if defined(__SANITIZE_ADDRESS__)
  switch_to(&current->context, &scheduler, scheduler_stack, scheduler_stack_bytes);
#else
  switch_to(&current->context, &scheduler, nullptr, 0);
#endif
}

void thread_main() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack, &scheduler_stack_bytes);
#endif
  try {
    (*body)();
  } catch (...) {
    if (!failure) failure = std::current_exception();
  }
  current->state = kDone;
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(nullptr, scheduler_stack, scheduler_stack_bytes);
#endif
  setcontext(&scheduler);
}

std::vector<unsigned> in_order(unsigned n, int64_t order) {
  std::vector<unsigned> indices(n);
  for (unsigned i = 0; i < n; ++i) indices[i] = order == kReverse ? n - 1 - i : i;
  if (order == kShuffled) std::shuffle(indices.begin(), indices.end(), settings.random);
  return indices;
}

void run_block(const Launch& launch) {
  const unsigned n = launch.threads.x;
  if (threads.size() < n) threads.resize(n);
  body = &launch.body;
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = threads[i];
    if (!t.stack) t.stack.reset(new char[kStackBytes]);
    getcontext(&t.context);
    t.context.uc_stack.ss_sp = t.stack.get();
    t.context.uc_stack.ss_size = kStackBytes;
    t.context.uc_link = nullptr;
    makecontext(&t.context, thread_main, 0);
    t.state = kRunning;
    t.barriers = 0;
  }
  // Garbage in shared memory: nothing may read it before a thread of this block wrote it.
  if (__start_emu_shared != __stop_emu_shared)
    std::memset(__start_emu_shared, 0xff, __stop_emu_shared - __start_emu_shared);
  for (;;) {
    for (unsigned t : in_order(n, settings.thread_order)) {
      if (threads[t].state != kRunning) continue;
      threadIdx.x = t;
      current = &threads[t];
      switch_to(&scheduler, &threads[t].context, threads[t].stack.get(), kStackBytes);
    }
    if (failure) std::rethrow_exception(std::exchange(failure, nullptr));
    // Every thread waits at a barrier or has returned.
    int64_t waiting = 0;
    for (unsigned t = 0; t < n; ++t) waiting += threads[t].state == kAtBarrier;
    if (waiting == 0) return;
    for (unsigned t = 0; t < n; ++t)
      TORCH_CHECK(threads[t].state == kAtBarrier && threads[t].barriers == threads[0].barriers,
                  "emulated device: divergent __syncthreads() in ", launch.name, " block ",
                  blockIdx.x, ": ", waiting, " of ", n, " threads wait at a barrier, thread ", t,
                  threads[t].state == kDone ? " has returned" : " waits at another one");
    for (unsigned t = 0; t < n; ++t) threads[t].state = kRunning;
  }
}

void run(const Launch& launch) {
  const dim3 g = launch.grid, t = launch.threads;
  TORCH_CHECK(g.x >= 1 && g.x <= 2147483647u && g.y >= 1 && g.y <= 65535 && g.z >= 1 &&
                  g.z <= 65535,
              "emulated device: invalid grid ", g.x, " x ", g.y, " x ", g.z, " for ", launch.name);
  TORCH_CHECK(t.x >= 1 && t.x <= 1024 && t.y == 1 && t.z == 1,
              "emulated device: invalid block of ", t.x, " threads for ", launch.name);
  log.push_back(launch.name + " " + std::to_string(g.x) + " " + std::to_string(t.x));
  gridDim = launch.grid;
  blockDim = launch.threads;
  for (unsigned b : in_order(launch.grid.x, settings.block_order)) {
    blockIdx.x = b;
    run_block(launch);
  }
}

}  // namespace

cudaStream_t current_stream() { return &streams[current_index]; }

void launch(std::string name, cudaStream_t stream, dim3 grid, dim3 threads, std::function<void()> body) {
  TORCH_CHECK(stream == current_stream(), "emulated device: ", name, " launched on stream ",
              stream_index(stream), " but the current stream is ", current_index);
  Launch l{std::move(name), grid, threads, std::move(body)};
  if (capturing) recording.launches.push_back(std::move(l));
  else run(l);
}

std::string kernel_name(const char* signature) {
  const std::string s = signature, key = "Kernel = ";
  const size_t at = s.find(key);
  if (at == std::string::npos) return s;
  std::string name = s.substr(at + key.size(), s.find_first_of(";]", at) - at - key.size());
  for (const std::string prefix : {"minimm::", "(anonymous namespace)::", "{anonymous}::"})
    for (size_t p; (p = name.find(prefix)) != std::string::npos;) name.erase(p, prefix.size());
  return name;
}

}  // namespace emu

void __syncthreads() {
  ++emu::current->barriers;
  emu::current->state = emu::kAtBarrier;
  emu::to_scheduler();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  const bool on = emu::capturing && stream == emu::capture_stream;
  *status = on ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
// The graph being captured is the next id; its handle is that id + 1 (never null).
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                     unsigned long long* id, cudaGraph_t* graph) {
  cudaStreamIsCapturing(stream, status);
  if (id) *id = emu::graphs.size();
  if (graph) *graph = reinterpret_cast<cudaGraph_t>(emu::graphs.size() + 1);
  return cudaSuccess;
}
cudaError_t cudaUserObjectCreate(cudaUserObject_t* object, void* pointer, cudaHostFn_t destroy,
                                 unsigned int count, unsigned int flags) {
  TORCH_CHECK(count == 1 && flags == cudaUserObjectNoDestructorSync, "emulated device: user object flags");
  *object = new CUuserObject_st{pointer, destroy};
  return cudaSuccess;
}
cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                      unsigned int flags) {
  TORCH_CHECK(emu::capturing && graph == reinterpret_cast<cudaGraph_t>(emu::graphs.size() + 1) &&
                  count == 1 && flags == cudaGraphUserObjectMove,
              "emulated device: a user object retained by a graph that is not being captured");
  emu::recording.objects.emplace_back(object);
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) {
  *value = static_cast<int>(emu::settings.sms);
  return cudaSuccess;
}
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void*, int, size_t) {
  *blocks = static_cast<int>(emu::settings.blocks_per_sm);
  return cudaSuccess;
}
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "emulated error";
}

// ---- the ops the tests steer it with ---------------------------------------------------------
namespace {

void configure(int64_t block_order, int64_t thread_order, int64_t seed, int64_t sms,
               int64_t blocks_per_sm) {
  TORCH_CHECK_VALUE(block_order >= 0 && block_order <= 2 && thread_order >= 0 && thread_order <= 2,
                    "orders are 0 (forward), 1 (reverse) or 2 (shuffled)");
  emu::settings = {block_order, thread_order, sms, blocks_per_sm,
                   std::mt19937(static_cast<unsigned>(seed))};
  emu::log.clear();
  emu::current_index = 0;
}

void set_stream(int64_t stream) {
  TORCH_CHECK_VALUE(stream >= 0 && stream < emu::kStreams, "streams are 0 .. ", emu::kStreams - 1);
  emu::current_index = stream;
}

void capture_begin() {
  TORCH_CHECK(!emu::capturing, "emulated device: a capture is already on");
  emu::capturing = true;
  emu::capture_stream = emu::current_stream();
  emu::recording = {};
}

int64_t capture_end() {
  TORCH_CHECK(emu::capturing, "emulated device: no capture is on");
  emu::capturing = false;
  emu::graphs.push_back(std::exchange(emu::recording, {}));
  return static_cast<int64_t>(emu::graphs.size()) - 1;
}

emu::Graph& graph_of(int64_t graph) {
  TORCH_CHECK_VALUE(graph >= 0 && graph < static_cast<int64_t>(emu::graphs.size()), "no graph ",
                    graph);
  return emu::graphs[graph];
}

void replay(int64_t graph) {
  for (const emu::Launch& l : graph_of(graph).launches) emu::run(l);
}

// The graph's end (torch.cuda.CUDAGraph.reset() or its deletion): no more replays, and its user
// objects are destroyed.
void reset_graph(int64_t graph) {
  emu::Graph& g = graph_of(graph);
  g.launches.clear();
  for (const auto& object : g.objects) object->destroy(object->pointer);
  g.objects.clear();
}

std::vector<std::string> take_log() { return std::exchange(emu::log, {}); }

// The emulator's own checks (tests/test_cuda_emu.py): a kernel whose upper half of threads
// returns before the barrier the others wait at, one that reads shared memory no thread of its
// block wrote, and a launch on a stream that is not the current one.
__global__ void divergent_kernel(int64_t* out) {
  if (threadIdx.x >= blockDim.x / 2) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void unwritten_shared_kernel(int64_t* out) {
  __shared__ int64_t value;
  if (blockIdx.x == 0 && threadIdx.x == 0) value = 7;
  __syncthreads();
  out[blockIdx.x] = value;
}

void run_selftest(const std::string& which, at::Tensor out) {
  int64_t* p = out.data_ptr<int64_t>();
  if (which == "divergent") MINIMM_LAUNCH(divergent_kernel, 1, 64, emu::current_stream(), p);
  else if (which == "shared") MINIMM_LAUNCH(unwritten_shared_kernel, 2, 32, emu::current_stream(), p);
  else if (which == "other_stream")
    MINIMM_LAUNCH(unwritten_shared_kernel, 1, 32, &emu::streams[(emu::current_index + 1) % emu::kStreams], p);
  else TORCH_CHECK_VALUE(false, "no self-test ", which);
}

// The plans on the emulated device, through the hooks the .cu files set (ema.h, pack.h): a plan
// of CPU tensors runs the CUDA code. Methods of a class, as the plans' own are: unlike an op's,
// their C++ warnings reach Python as warnings.
struct Plans : torch::CustomClassHolder {};

// A table as tensors, for the tests' checks of its chunking: [row, first, n] of every chunk,
// every row's numel, [first, count, blocks] of every segment, and the streams it remembers.
std::vector<at::Tensor> table_tensors(const minimm::Table& table) {
  std::vector<int64_t> chunks, numel, segments;
  for (const minimm::Chunk& c : table.chunks) chunks.insert(chunks.end(), {c.row, c.first, c.n});
  for (const minimm::Row& r : table.rows) numel.push_back(r.numel);
  for (const minimm::Segment& s : table.segments) segments.insert(segments.end(), {s.first, s.count, s.blocks});
  auto rows_of = [](const std::vector<int64_t>& v) { return at::tensor(v, at::kLong).reshape({-1, 3}); };
  return {rows_of(chunks), at::tensor(numel, at::kLong), rows_of(segments),
          at::tensor(static_cast<int64_t>(table.streams.size()))};
}
using PlansPtr = c10::intrusive_ptr<Plans>;
using EMAPlanPtr = c10::intrusive_ptr<minimm::EMAPlan>;
using PackPlanPtr = c10::intrusive_ptr<minimm::PackPlan>;

const auto plans_class =
    torch::class_<Plans>("minimm_emu", "Plans")
        .def(torch::init<>())
        .def("ema_step", [](const PlansPtr&, const EMAPlanPtr& plan, std::vector<at::Tensor> steps) {
          minimm::cuda_plan_step(*plan, steps);
        })
        .def("pack_run", [](const PlansPtr&, const PackPlanPtr& plan, bool unpack, double scale) {
          if (!plan->tensors.empty()) plan->run(unpack, scale, minimm::cuda_pack_run);
        })
        .def("ema_table", [](const PlansPtr&, const EMAPlanPtr& plan) { return table_tensors(plan->table); })
        .def("pack_table", [](const PlansPtr&, const PackPlanPtr& plan, int64_t which) {
          return table_tensors(which == 0 ? plan->pack_table : which == 1 ? plan->unpack_table : plan->scaled_table);
        });

}  // namespace

TORCH_LIBRARY(minimm_emu, m) {
  m.def("configure(int block_order, int thread_order, int seed, int sms, int blocks_per_sm) -> ()",
        &configure);
  m.def("capture_begin() -> ()", &capture_begin);
  m.def("capture_end() -> int", &capture_end);
  m.def("replay(int graph) -> ()", &replay);
  m.def("reset_graph(int graph) -> ()", &reset_graph);
  m.def("set_stream(int stream) -> ()", &set_stream);
  m.def("take_log() -> str[]", &take_log);
  m.def("selftest(str which, Tensor(a!) out) -> ()", &run_selftest);
}
