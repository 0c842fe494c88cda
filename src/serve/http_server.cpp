#include "serve/http_server.hpp"

#include "core/host_allocation.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <regex>
#include <thread>
#include <type_traits>

namespace kiln::serve {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::optional<std::string> http_request::header(std::string_view name) const {
    for (auto& [key, value] : headers)
        if (beast::iequals(key, beast::string_view(name.data(), name.size()))) return value;
    return std::nullopt;
}

namespace {

// %XX sequences decoded; a malformed one is kept as it is ('+' stays '+' in a path).
std::string percent_decoded(std::string_view s) {
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
            out.push_back(char(hex(s[i + 1]) * 16 + hex(s[i + 2])));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

}  // namespace

struct http_server::impl {
    struct route_entry {
        std::string method;
        std::regex pattern;
        handler run;
    };

    explicit impl(http_options o) : options(std::move(o)) {
        if (options.threads == 0) options.threads = 1;
        for (std::size_t i = 0; i < options.threads; ++i) workers.push_back(std::make_unique<worker>());
        if (options.tls_cert.empty() && options.tls_key.empty()) return;
        tls.emplace(asio::ssl::context::tls_server);
        tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                         asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        beast::error_code ec, ec2;
        tls->use_certificate_chain_file(options.tls_cert, ec);
        tls->use_private_key_file(options.tls_key, asio::ssl::context::pem, ec2);
        valid = !ec && !ec2;
    }

    // Accepts the next connection onto the worker with the fewest open connections.
    void accept();
    // Runs the request's route (or refuses it); always leaves a complete response in res.
    void answer(http_request& req, http_response& res) const;
    void refuse(const http_request& req, http_response& res, int status) const {
        res = http_response{};
        res.status = status;
        if (on_error) on_error(req, res);
    }

    http_options options;
    std::vector<route_entry> routes;
    std::function<bool(const http_request&, http_response&)> before_body;
    std::function<std::size_t(const http_request&)> body_alignment;
    handler on_error;
    bool valid = true;
    std::atomic<bool> stopping{false};
    std::atomic<int> busy{0};  // connections between a request's head and its answer's last byte
    // Declared before the io_contexts: the connections that their destruction frees still use it.
    std::optional<asio::ssl::context> tls;
    // One io_context per thread: a connection lives on one worker for its life, so its reads,
    // handler and writes run on one thread without hand-offs (a shared context woke another
    // thread for every completion). A worker busy in a handler delays only its own connections.
    struct worker {
        asio::io_context io{1};
        asio::executor_work_guard<asio::io_context::executor_type> keep{io.get_executor()};
        std::atomic<int> connections{0};
    };
    std::vector<std::unique_ptr<worker>> workers;
    asio::io_context accept_io{1};
    tcp::acceptor acceptor{accept_io};
};

void http_server::impl::answer(http_request& req, http_response& res) const {
    std::smatch m;
    for (auto& r : routes) {
        if (r.method != req.method || !std::regex_match(req.path, m, r.pattern)) continue;
        req.groups.clear();
        for (std::size_t i = 1; i < m.size(); ++i)
            req.groups.push_back(m[i].matched ? std::optional<std::string>(m[i].str()) : std::nullopt);
        try {
            r.run(req, res);
        } catch (...) {
            refuse(req, res, 500);
            return;
        }
        if (res.status >= 400 && res.body.empty() && on_error) on_error(req, res);
        return;
    }
    refuse(req, res, 404);
}

namespace {

// One connection: read a head, maybe answer before the body, read the body, answer, and
// again while the client keeps it alive. Plain TCP or TLS over it.
template <class Stream>
class connection : public std::enable_shared_from_this<connection<Stream>> {
    static constexpr bool tls = !std::is_same_v<Stream, beast::tcp_stream>;

public:
    template <class... Args>
    connection(http_server::impl& server, std::atomic<int>& open, Args&&... args)
        : server_(server), open_(open), stream_(std::forward<Args>(args)...) {
        ++open_;
    }

    ~connection() {
        set_busy(false);
        --open_;
    }

    void start() {
        if constexpr (tls) {
            beast::get_lowest_layer(stream_).expires_after(server_.options.read_timeout);
            stream_.async_handshake(asio::ssl::stream_base::server,
                                    [self = this->shared_from_this()](beast::error_code ec) {
                                        if (!ec) self->read_head();
                                    });
        } else {
            read_head();
        }
    }

private:
    void read_head() {
        parser_.emplace();
        parser_->body_limit(server_.options.max_body_bytes);
        beast::get_lowest_layer(stream_).expires_after(first_ ? server_.options.read_timeout
                                                              : server_.options.keep_alive);
        first_ = false;
        http::async_read_header(
            stream_, buffer_, *parser_,
            [self = this->shared_from_this()](beast::error_code ec, std::size_t) { self->on_head(ec); });
    }

    // The request's method, path and headers, from the parser (its body not yet read).
    void take_head() {
        auto& head = parser_->get();
        req_ = http_request{};
        req_.method = std::string(head.method_string());
        auto target = std::string_view(head.target().data(), head.target().size());
        req_.path = percent_decoded(target.substr(0, target.find('?')));
        for (auto& field : head)
            req_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }

    void set_busy(bool busy) {
        if (busy == busy_) return;
        busy_ = busy;
        busy ? ++server_.busy : --server_.busy;
    }

    void on_head(beast::error_code ec) {
        if (ec) return refuse_or_close(ec);
        set_busy(true);
        take_head();
        auto& head = parser_->get();
        if (server_.before_body) {
            res_ = http_response{};
            bool answered = false;
            try {
                answered = server_.before_body(req_, res_);
            } catch (...) {
                server_.refuse(req_, res_, 500);
                answered = true;
            }
            if (answered) return respond(false);  // the body stays unread: the connection ends
        }
        auto expect = head[http::field::expect];
        if (!parser_->is_done() && beast::iequals(expect, "100-continue")) {
            continue_ = http::response<http::empty_body>{http::status::continue_, head.version()};
            beast::get_lowest_layer(stream_).expires_after(server_.options.write_timeout);
            http::async_write(stream_, continue_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                if (!ec) self->read_body();
            });
            return;
        }
        read_body();
    }

    // A body of known length goes straight into a buffer of its own, each read taking all the
    // socket holds up to the rest of the body (a 602 KB tensor in a few reads, each with its
    // own timeout: a slow client may take long, an idle one not). The buffer is allocated
    // whole but not filled (untouched pages cost nothing, so a large Content-Length alone
    // takes no memory), placed so that the offset body_alignment names lies on 64 bytes.
    // Chunked bodies go through the parser.
    void read_body() {
        if (parser_->is_done()) return run(std::move(parser_->get().body()));
        auto length = parser_->content_length();
        if (!length || parser_->chunked()) return read_chunked();
        body_length_ = *length;  // at most max_body_bytes: the parser checked the head
        const std::size_t aligned = std::min(alignment_wanted(), body_length_);
        const std::size_t lead = (64 - aligned % 64) % 64;
        auto* p = static_cast<char*>(kiln::detail::allocate_host(lead + body_length_));
        if (p == nullptr) {
            server_.refuse(req_, res_, 413);
            return respond(false);
        }
        body_storage_ = std::shared_ptr<char>(p, [](char* q) { std::free(q); });
        body_ = p + lead;
        auto buffered = std::min<std::size_t>(buffer_.size(), body_length_);
        asio::buffer_copy(asio::buffer(body_, buffered), buffer_.data());
        buffer_.consume(buffered);
        read_rest(buffered);
    }

    std::size_t alignment_wanted() {
        if (!server_.body_alignment) return 0;
        try {
            return server_.body_alignment(req_);
        } catch (...) {
            return 0;  // a malformed hint: the handler says what is wrong with it
        }
    }

    void read_rest(std::size_t have) {
        if (have == body_length_) return run_stored();
        beast::get_lowest_layer(stream_).expires_after(server_.options.read_timeout);
        stream_.async_read_some(asio::buffer(body_ + have, body_length_ - have),
                                [self = this->shared_from_this(), have](beast::error_code ec, std::size_t n) {
                                    if (ec) return self->close();
                                    self->read_rest(have + n);
                                });
    }

    void run_stored() {
        req_.body = std::string_view(body_, body_length_);
        req_.body_storage = std::move(body_storage_);
        body_ = nullptr;
        answer();
    }

    void read_chunked() {
        if (parser_->is_done()) return run(std::move(parser_->get().body()));
        buffer_.reserve(64 << 10);  // the parser reads as much as the buffer can take, up to 64 KiB
        beast::get_lowest_layer(stream_).expires_after(server_.options.read_timeout);
        http::async_read_some(stream_, buffer_, *parser_,
                              [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                                  if (ec) return self->refuse_or_close(ec);
                                  self->read_chunked();
                              });
    }

    // A body the parser read (small ones that came with the head, chunked ones).
    void run(std::string&& body) {
        auto owned = std::make_shared<std::string>(std::move(body));
        req_.body = *owned;
        req_.body_storage = std::shared_ptr<const char>(owned, owned->data());
        answer();
    }

    void answer() {
        keep_alive_ = parser_->get().keep_alive();
        res_ = http_response{};
        server_.answer(req_, res_);
        req_.body = {};
        req_.body_storage.reset();  // the handler may keep it; the connection does not
        respond(keep_alive_);
    }

    // A request the parser refused gets an answer (413: too large; 400: malformed) and the
    // connection ends; a closed, reset or timed-out one just ends.
    void refuse_or_close(beast::error_code ec) {
        int status = ec == http::error::body_limit ? 413 : 400;
        if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
            ec == asio::error::connection_reset || ec == asio::error::eof ||
            ec.category() == asio::error::get_ssl_category() || ec == http::error::partial_message)
            return close();
        take_head();  // what the parser got (all of the head when the Content-Length is too large)
        server_.refuse(req_, res_, status);
        respond(false);
    }

    void respond(bool keep_alive) {
        keep_alive_ = keep_alive;
        out_ = {};
        out_.result(static_cast<unsigned>(res_.status));
        out_.version(parser_ && parser_->get().version() == 10 ? 10 : 11);
        if (!res_.content_type.empty()) out_.set(http::field::content_type, res_.content_type);
        for (auto& [key, value] : res_.headers) out_.set(key, value);
        out_.body() = std::move(res_.body);
        out_.keep_alive(keep_alive);
        out_.prepare_payload();
        beast::get_lowest_layer(stream_).expires_after(server_.options.write_timeout);
        http::async_write(stream_, out_, [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
            self->set_busy(false);
            if (ec) return;
            if (self->keep_alive_ && !self->server_.stopping)
                self->read_head();
            else
                self->close();
        });
    }

    void close() {
        if constexpr (tls) {
            beast::get_lowest_layer(stream_).expires_after(server_.options.read_timeout);
            stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
        } else {
            beast::error_code ignored;
            stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
        }
    }

    http_server::impl& server_;
    std::atomic<int>& open_;
    Stream stream_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    http::response<http::empty_body> continue_;
    http::response<http::string_body> out_;
    std::shared_ptr<char> body_storage_;  // a body of known length, read past the parser,
    char* body_ = nullptr;                // into body_storage_ from here
    std::size_t body_length_ = 0;
    http_request req_;
    http_response res_;
    bool first_ = true;
    bool keep_alive_ = false;
    bool busy_ = false;
};

}  // namespace

void http_server::impl::accept() {
    auto& w = **std::min_element(workers.begin(), workers.end(),
                                 [](auto& a, auto& b) { return a->connections < b->connections; });
    acceptor.async_accept(w.io, [this, &w](beast::error_code ec, tcp::socket socket) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;  // stop()
        if (!ec) {
            beast::error_code ignored;
            socket.set_option(tcp::no_delay(true), ignored);
            if (tls)
                std::make_shared<connection<beast::ssl_stream<beast::tcp_stream>>>(*this, w.connections,
                                                                                   std::move(socket), *tls)
                    ->start();
            else
                std::make_shared<connection<beast::tcp_stream>>(*this, w.connections, std::move(socket))->start();
        }
        accept();
    });
}

http_server::http_server(http_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
http_server::~http_server() = default;

void http_server::route(std::string method, const std::string& pattern, handler h) {
    impl_->routes.push_back({std::move(method), std::regex(pattern), std::move(h)});
}

int http_server::bind(const std::string& host, int port) {
    auto& s = *impl_;
    if (!s.valid || port < 0 || port > 65535) return -1;
    beast::error_code ec;
    tcp::resolver resolver(s.accept_io);
    auto found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || found.empty()) return -1;
    auto endpoint = found.begin()->endpoint();
    s.acceptor.open(endpoint.protocol(), ec);
    if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) s.acceptor.bind(endpoint, ec);
    if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        beast::error_code ignored;
        s.acceptor.close(ignored);
        return -1;
    }
    return s.acceptor.local_endpoint().port();
}

void http_server::set_body_alignment(std::function<std::size_t(const http_request&)> f) {
    impl_->body_alignment = std::move(f);
}

void http_server::set_before_body(std::function<bool(const http_request&, http_response&)> f) {
    impl_->before_body = std::move(f);
}
void http_server::set_error_handler(handler f) { impl_->on_error = std::move(f); }

void http_server::listen() {
    auto& s = *impl_;
    if (!s.acceptor.is_open()) return;
    s.accept();
    std::vector<std::thread> threads;
    for (auto& w : s.workers) threads.emplace_back([&w] { w->io.run(); });
    s.accept_io.run();
    for (auto& t : threads) t.join();
}

void http_server::stop() {
    auto& s = *impl_;
    s.stopping = true;
    asio::post(s.accept_io, [&s] {
        beast::error_code ignored;
        s.acceptor.close(ignored);
    });
    // Requests being read or answered finish (their connections then close); idle
    // keep-alive connections are dropped.
    auto deadline = std::chrono::steady_clock::now() + s.options.read_timeout;
    while (s.busy > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    s.accept_io.stop();
    for (auto& w : s.workers) w->io.stop();
}

}  // namespace kiln::serve
