#include "serialize/file_io.hpp"

#include "core/host_allocation.hpp"

#include <kiln/errors.hpp>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::kiln_file {

namespace {

constexpr std::size_t buffer_capacity = std::size_t{1} << 20;

std::string errno_text(int e) { return std::strerror(e); }

std::string parent_directory(const std::string& path) {
    auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_name(const std::string& path) {
    auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

atomic_file::atomic_file(std::string path) : path_(std::move(path)) {
    if (path_.empty() || path_.back() == '/') throw_error(error_code::io, "cannot save to '" + path_ + "': not a file name");
    static std::atomic<unsigned> counter{0};
    // A hidden name next to the target; O_EXCL retries on the unlikely clash. Mode
    // 0666 lets the umask decide permissions, as for any newly created file.
    for (int attempt = 0; attempt < 100; ++attempt) {
        temp_ = parent_directory(path_) + "/." + base_name(path_) + ".tmp." + std::to_string(::getpid()) + "." +
                std::to_string(counter++);
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ >= 0) break;
        if (errno != EEXIST)
            throw_error(error_code::io, "cannot save to '" + path_ + "': cannot create a file in " +
                                            parent_directory(path_) + ": " + errno_text(errno));
    }
    if (fd_ < 0) throw_error(error_code::io, "cannot save to '" + path_ + "': no free temporary file name");
    buffer_.resize(buffer_capacity);
}

atomic_file::~atomic_file() {
    if (fd_ >= 0) ::close(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
}

void atomic_file::fail(const std::string& what) const {
    throw_error(error_code::io, "cannot save to '" + path_ + "': " + what);
}

void atomic_file::write_all(const char* data, std::size_t size) {
    while (size > 0) {
        auto n = ::write(fd_, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write failed: " + errno_text(errno));
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

void atomic_file::flush() {
    write_all(buffer_.data(), used_);
    used_ = 0;
}

void atomic_file::write(const char* data, std::size_t size) {
    if (used_ + size <= buffer_.size()) {
        std::memcpy(buffer_.data() + used_, data, size);
        used_ += size;
        return;
    }
    flush();
    if (size >= buffer_.size()) {
        write_all(data, size);
    } else {
        std::memcpy(buffer_.data(), data, size);
        used_ = size;
    }
}

void atomic_file::write_at(std::uint64_t offset, const char* data, std::size_t size) {
    flush();
    while (size > 0) {
        auto n = ::pwrite(fd_, data, size, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write failed: " + errno_text(errno));
        }
        data += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
}

void atomic_file::commit() {
    flush();
    if (::fsync(fd_) != 0) fail("fsync failed: " + errno_text(errno));
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close failed: " + errno_text(errno));
    if (::rename(temp_.c_str(), path_.c_str()) != 0) fail("rename failed: " + errno_text(errno));
    temp_.clear();
    // Make the rename itself durable. Some file systems cannot fsync a directory;
    // the file is complete and in place either way, so this is best effort.
    int dir = ::open(parent_directory(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        (void)::fsync(dir);
        ::close(dir);
    }
}

input_file::input_file(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw_error(error_code::io, "cannot open '" + path + "': " + errno_text(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
        int e = errno;
        ::close(fd_);
        throw_error(error_code::io, "cannot stat '" + path + "': " + errno_text(e));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd_);
        throw_error(error_code::io, "cannot load '" + path + "': not a regular file");
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
    int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

input_file::~input_file() {
    if (fd_ >= 0) ::close(fd_);
}

void input_file::read(char* dst, std::size_t size) {
    while (size > 0) {
        auto n = ::read(fd_, dst, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_error(error_code::io, "cannot read '" + path_ + "': " + errno_text(errno));
        }
        if (n == 0) throw_error(error_code::io, "cannot read '" + path_ + "': the file shrank while being read");
        dst += n;
        size -= static_cast<std::size_t>(n);
    }
}

std::shared_ptr<char> allocate_aligned(std::size_t size) {
    void* p = detail::allocate_host(size);
    if (p == nullptr) throw_error(error_code::out_of_memory, "cannot allocate " + std::to_string(size) + " bytes");
    return std::shared_ptr<char>(static_cast<char*>(p), [](char* q) { std::free(q); });
}

}  // namespace kiln::kiln_file
