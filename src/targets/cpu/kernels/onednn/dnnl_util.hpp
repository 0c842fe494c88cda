// Glue between Kiln's IR and oneDNN: memory descriptors from shapes (a strided IR shape
// is a plain oneDNN layout, so channels-last needs nothing special), a serializable form
// of blocked descriptors (weights stored pre-reordered in compiled programs), and the
// OpenMP thread count oneDNN reads when it creates a primitive.
#pragma once
#include <kiln/shape.hpp>
#include <kiln/value.hpp>

#include <dnnl.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

// The oneDNN data types the cpu target lowers (float32 today: the quantization issue
// adds int8, and this CPU has no native bf16/f16 arithmetic).
bool dnnl_type_supported(type t);
dnnl::memory::data_type to_dnnl_type(type t);

dnnl::memory::dims to_dims(const std::vector<std::size_t>& v);
dnnl::memory::dims to_dims(const std::vector<std::int64_t>& v);

// The layout of a tensor shape: its lens and strides (elements) as a plain descriptor.
dnnl::memory::desc md_of(const shape& s);
// The same memory seen with other dims (e.g. 1-D operands of matmul as 2-D rows): the
// shape's strides are kept for the dims it has, new leading dims of length 1 get
// the outermost stride.
dnnl::memory::desc md_with_rank(const shape& s, std::size_t rank);
// The shape's dims with the layout left to oneDNN (format any).
dnnl::memory::desc any_md(const shape& s);
// The same layout (or format any) with another element type.
dnnl::memory::desc retyped(const dnnl::memory::desc& md, dnnl::memory::data_type t);

// Channels-last strides for lens (N, C, spatial...): C innermost, then the spatial
// dims in order, N outermost. For rank < 3 this is row-major.
std::vector<std::size_t> channels_last_strides(const std::vector<std::size_t>& lens);
bool is_channels_last(const shape& s);

// A memory descriptor in the reflected form that compiled programs store: enough to
// rebuild a blocked (or plain) layout exactly. Other format kinds are not stored.
struct md_record {
    std::int64_t data_type = 0;
    std::vector<std::int64_t> dims, padded_dims, padded_offsets;
    std::int64_t offset0 = 0;
    std::vector<std::int64_t> strides, inner_blks, inner_idxs;
    std::uint64_t extra_flags = 0;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.data_type, "data_type");
        f(self.dims, "dims");
        f(self.padded_dims, "padded_dims");
        f(self.padded_offsets, "padded_offsets");
        f(self.offset0, "offset0");
        f(self.strides, "strides");
        f(self.inner_blks, "inner_blks");
        f(self.inner_idxs, "inner_idxs");
        f(self.extra_flags, "extra_flags");
    }
    bool empty() const { return dims.empty(); }
    // False for descriptors that are not a plain/blocked layout.
    static bool representable(const dnnl::memory::desc& md);
    static md_record from(const dnnl::memory::desc& md);
    // Throws a kiln error when the record is inconsistent (a corrupted file).
    dnnl::memory::desc to_md() const;
};

// The block size of a blocked 4-D activation layout aBcd<b>b (b = 8 or 16) with dims
// (n, c, h, w), dense and unpadded except for channels, or 0 for any other layout.
std::int64_t channel_block(const md_record& layout);
// The channels stored together at each pixel of a 4-D activation layout that is
// [n][c / g][h][w][g]: g = the block of a blocked layout (channel_block), or c for the
// dense channels-last layout (nhwc: one block of all channels; oneDNN's choice for
// convolutions on AVX-512 machines, where its brgemm kernels prefer it); 0 for any other.
std::int64_t pixel_channels(const md_record& layout);
// x and y each store their channels per pixel in groups of a multiple of 8 (8-lane vectors
// over a group never straddle two): what Kiln's Winograd and conv_gemm kernels take.
bool channel_groups_fit(const md_record& x, const md_record& y);
// Both recorded (not plain) and the same oneDNN layout.
bool same_layout(const md_record& a, const md_record& b);
// x's kind of pixel-channels layout (channel blocks of 8 or 16, or channels-last) for
// float32 values of NCHW dims `dims` (a pooling's result).
md_record pixel_channels_layout_like(const md_record& x, const std::vector<std::size_t>& dims);
// The float32 layout of NCHW dims `dims` in channel blocks of `block` (8 or 16), or
// channels-last for any other block (0).
md_record pixel_channels_layout(std::int64_t block, const std::vector<std::size_t>& dims);
// Throws a shape error naming `op` unless x is a float32 4-D (NCHW) tensor whose dims are
// those of `layout`, a recorded layout that stores its channels per pixel.
void expect_pixel_channels_input(const std::string& op, const shape& x, const md_record& layout);

// Sets the calling thread's OpenMP team size while oneDNN creates primitives (their
// kernels are laid out for the thread count seen at creation), then restores it.
// Work below which a kernel runs on the calling thread alone: a parallel region costs a few
// microseconds on idle cores and a scheduler time slice when the other cores are busy (a
// gpt_kv decode step took 13-21 ms with 2 threads on a loaded 2-core machine, 0.1 ms with
// one). Elements for elementwise-sized work, multiply-adds for products.
inline constexpr std::size_t single_thread_elements = std::size_t{1} << 13;
inline constexpr std::size_t single_thread_macs = std::size_t{1} << 18;

class omp_threads_scope {
public:
    explicit omp_threads_scope(std::size_t threads);
    ~omp_threads_scope();
    omp_threads_scope(const omp_threads_scope&) = delete;
    omp_threads_scope& operator=(const omp_threads_scope&) = delete;

private:
    int saved_;
};

// The implementation oneDNN chose, e.g. "jit:avx2" (for tests and the profile).
std::string impl_name(const dnnl::primitive_desc_base& pd);
// impl_name with the operands' data types, e.g. "brg:avx512_core_vnni u8 x s8 -> u8"
// (kiln perf --per-instruction: which kernel, ISA and precision ran).
std::string kernel_description(const dnnl::primitive_desc_base& pd);

}  // namespace kiln::cpu
