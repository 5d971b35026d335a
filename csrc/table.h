// The table every kernel of minimm walks, on the CPU and on the GPU alike: one row per tensor
// (where to write, where to read, how many elements, what to do) and a list of chunks, each a
// piece of one row. The CPU runs one at::parallel_for over the chunks; the CUDA kernels map their
// blocks onto them (multi_tensor_apply.cuh). Both devices use the same chunking, so the CPU
// tests exercise the index math the GPU relies on.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Stream.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace minimm {

// Every chunk covers kChunkBytes of the wider side of its row (the last chunk of a row may be
// shorter): on a GPU one block's work per chunk, 256 threads x 4 vectors x 16 bytes.
constexpr int64_t kChunkBytes = 16384;
// Every tensor starts at a multiple of kAlignBytes in a pack's flat tensor, so that each slice
// is aligned for a 16-byte vector load.
constexpr int64_t kAlignBytes = 16;
C10_HOST_DEVICE inline int64_t align_up(int64_t n, int64_t quantum) { return (n + quantum - 1) / quantum * quantum; }

// What a row does on one call; the CUDA kernel switches on it, the CPU keeps a function per row.
enum Mode : int32_t {
  kDecide = 0,             // floating pair of an averaged model: copy, average or skip, from the counter
  kCopyUnlessSkipped = 1,  // integer pair of an averaged model: copied on copying and averaging calls
  kCopyAlways = 2,         // mirrored pair (buffers), or pack/unpack
};

struct Row {
  void* dst;
  const void* src;
  int64_t numel;
  int32_t kernel;  // which element loop (ema.h, pack.h numbers); on a GPU also which kernel runs it
  int32_t mode;    // Mode
};

struct Chunk {
  int64_t first;  // first element of the row
  int32_t row;
  int32_t n;      // elements
};

// On a GPU, one launch per kind of row present (a dtype pair, a byte copy...): each kernel is
// compiled for one kind only, which keeps it small (registers, occupancy). upload() reorders the
// chunks so that those of one kind sit together and lists them here.
struct Segment {
  int32_t kind;
  int64_t first, count;   // chunks [first, first + count) of the table
  unsigned int blocks;    // grid size: enough to fill the GPU, no more than `count`
};

// What one call runs: the rows, their chunks, and on a GPU both copied once into device memory,
// so that a launch passes one pointer.
struct Table {
  std::vector<Row> rows;
  std::vector<Chunk> chunks;
  // EMA plans of several averaged copies: each chunk stands for `targets` consecutive rows from
  // chunk.row on (one source, one copy each), all of one kind; 1 everywhere else.
  int32_t targets = 1;
  int64_t units = 0;                 // elements (bytes for byte rows) of all rows
  std::vector<Segment> segments;     // GPU only, set by upload()
  at::Tensor device;                 // undefined until the first CUDA run after a build
  // GPU only: the last few streams the table ran on (use_on(), which records its memory there).
  std::vector<c10::Stream> streams;
  // A plan's table: the storages its rows point into (the plan's table_storages); null for a
  // list op's table, which lives for one call.
  const std::vector<c10::Storage>* storages = nullptr;
};

// Reorders the chunks so that each kind's are contiguous, in row order (a counting sort over at
// most `kinds` kinds), and lists one segment per kind present. `kind_of` maps a Row to its kind.
template <typename KindOf>
void group_by_kind(Table& table, int32_t kinds, KindOf kind_of) {
  std::vector<int64_t> start(kinds + 1, 0);
  for (const Chunk& c : table.chunks) ++start[kind_of(table.rows[c.row]) + 1];
  for (int32_t k = 0; k < kinds; ++k) start[k + 1] += start[k];
  std::vector<Chunk> sorted(table.chunks.size());
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (const Chunk& c : table.chunks) sorted[next[kind_of(table.rows[c.row])]++] = c;
  table.chunks = std::move(sorted);
  table.segments.clear();
  for (int32_t k = 0; k < kinds; ++k)
    if (start[k + 1] > start[k]) table.segments.push_back({k, start[k], start[k + 1] - start[k], 0});
}

// A storage recorded as in use on `stream` (GPU memory only): the caching allocator then keeps it
// from other streams until the work queued on `stream` by then has run, even once it is freed.
inline void record_on(const c10::Storage& storage, const c10::Stream& stream) {
  if (storage.device_type() != c10::DeviceType::CUDA) return;
  at::Tensor bytes = at::empty({0}, at::dtype(at::kByte).device(storage.device()));
  bytes.set_(storage);
  bytes.record_stream(stream);
}

// Appends the chunks of row `row` of `numel` elements, each `elem_bytes` wide (the wider side).
inline void add_chunks(Table& table, int32_t row, int64_t numel, int64_t elem_bytes) {
  const int64_t per_chunk = kChunkBytes / elem_bytes;
  table.units += numel;
  for (int64_t first = 0; first < numel; first += per_chunk)
    table.chunks.push_back({first, row, static_cast<int32_t>(std::min(per_chunk, numel - first))});
}

}  // namespace minimm
