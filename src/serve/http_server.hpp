// A small HTTP/1.1 server on Boost.Beast (Asio) for the REST front end and the metrics page.
// Why not cpp-httplib any more: Debian's build of it reads a request body 4 KiB at a time,
// each read after a poll (~150 reads and polls for a 602 KB tensor); here a body is read
// into a flat buffer in reads of up to 64 KiB, each tried at once (docs/server.md).
//
// Connections are asynchronous (an idle keep-alive connection holds no thread); a request's
// handler runs synchronously on one of `threads` threads, so that many requests compute at
// once. Beast and Asio stay inside http_server.cpp.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::serve {

struct http_request {
    std::string method;  // as sent: "GET", "POST", ...
    std::string path;    // the target without its query, percent-decoded
    std::vector<std::pair<std::string, std::string>> headers;
    // Empty until the body is read (not yet in before_body). Its bytes live in body_storage,
    // which a handler may hold to keep them (a tensor aliasing a request's binary data).
    std::string_view body;
    std::shared_ptr<const char> body_storage;
    // The route's capture groups: group(1) is the first; a group that took no part is
    // absent (has_group false, group "").
    std::vector<std::optional<std::string>> groups;

    // A header's value by case-insensitive name; nullopt when absent.
    std::optional<std::string> header(std::string_view name) const;
    bool has_group(std::size_t i) const { return i >= 1 && i <= groups.size() && groups[i - 1].has_value(); }
    std::string group(std::size_t i) const { return has_group(i) ? *groups[i - 1] : std::string(); }
};

struct http_response {
    int status = 200;
    std::string body;
    std::string content_type;
    std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type and -Length

    void set_content(std::string b, std::string type) {
        body = std::move(b);
        content_type = std::move(type);
    }
};

struct http_options {
    std::size_t threads = 64;                           // requests handled at once
    std::size_t max_body_bytes = std::size_t(1) << 30;  // larger bodies: 413 before they are read
    std::chrono::seconds keep_alive{5};                 // idle wait for a connection's next request
    std::chrono::seconds read_timeout{5};               // the longest wait for one read of a request
    std::chrono::seconds write_timeout{60};             // the longest a response may take to send
    std::string tls_cert, tls_key;                      // PEM files: HTTPS when both are set
};

class http_server {
public:
    using handler = std::function<void(const http_request&, http_response&)>;

    explicit http_server(http_options options);
    ~http_server();
    http_server(const http_server&) = delete;
    http_server& operator=(const http_server&) = delete;

    // Routes are tried in the order added; `pattern` must match the whole path
    // (std::regex, ECMAScript). A handler's exception answers 500 through on_error.
    void route(std::string method, const std::string& pattern, handler h);
    // Called with the request's head (no body yet); returns true when it answered the
    // request itself (then the body is never read and the connection closes).
    void set_before_body(std::function<bool(const http_request&, http_response&)> f);
    // Called with the head of a request whose body has a known length: the offset into the
    // body that should lie on a 64-byte boundary in memory (0: the body's start). The REST
    // front end names its binary tensors' start, so the first can be used where it lies.
    void set_body_alignment(std::function<std::size_t(const http_request&)> f);
    // Fills the body of the server's own refusals (no route: 404; body too large: 413;
    // malformed request: 400; a handler's exception: 500) and of handlers' bodiless >= 400s.
    void set_error_handler(handler f);

    // Binds host:port (0: any free port) with SO_REUSEADDR alone, so a busy port is an
    // error; returns the port, or -1 when it cannot bind (or the TLS files did not load).
    int bind(const std::string& host, int port);
    // Serves until stop() (call the setters and route() before).
    void listen();
    // Stops accepting, lets the requests being read or answered finish (up to the read
    // timeout), then ends listen().
    void stop();

    struct impl;  // Beast's and Asio's side, in http_server.cpp only

private:
    std::unique_ptr<impl> impl_;
};

}  // namespace kiln::serve
