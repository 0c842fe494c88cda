// Files for the .kiln format: an atomic writer (temporary file, fsync, rename) and a
// reader that refuses anything but a regular file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::kiln_file {

// Where encoded bytes go.
class output_sink {
public:
    virtual ~output_sink() = default;
    virtual void write(const char* data, std::size_t size) = 0;
};

// Appends to a string.
class string_sink final : public output_sink {
public:
    explicit string_sink(std::string& out) : out_(out) {}
    void write(const char* data, std::size_t size) override { out_.append(data, size); }

private:
    std::string& out_;
};

// A file that appears at `path` only when commit() succeeds. The bytes go to a
// temporary file in the same directory (so the final rename stays on one file
// system); the destructor removes it unless it was committed.
class atomic_file final : public output_sink {
public:
    explicit atomic_file(std::string path);
    ~atomic_file() override;
    atomic_file(const atomic_file&) = delete;
    atomic_file& operator=(const atomic_file&) = delete;

    // Buffered; large writes go straight to the file without a copy.
    void write(const char* data, std::size_t size) override;
    // Overwrites bytes already written (the header, once the payload is known).
    void write_at(std::uint64_t offset, const char* data, std::size_t size);
    // Flushes, fsyncs, renames over `path` and fsyncs the directory.
    void commit();

private:
    void flush();
    void write_all(const char* data, std::size_t size);
    [[noreturn]] void fail(const std::string& what) const;

    std::string path_;
    std::string temp_;
    int fd_ = -1;
    std::vector<char> buffer_;
    std::size_t used_ = 0;
};

// A regular file opened for reading.
class input_file {
public:
    explicit input_file(const std::string& path);
    ~input_file();
    input_file(const input_file&) = delete;
    input_file& operator=(const input_file&) = delete;

    std::uint64_t size() const { return size_; }
    // Reads exactly `size` bytes from the current position; throws on a short read.
    void read(char* dst, std::size_t size);

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// Uninitialized, 64-byte aligned host memory (the alignment argument buffers have),
// so literals can point into a loaded file. Throws out_of_memory when it cannot.
std::shared_ptr<char> allocate_aligned(std::size_t size);

}  // namespace kiln::kiln_file
