// The HTTP/1.1 server under the REST front end, spoken to over raw loopback sockets: bodies
// of known length, chunked and behind `Expect: 100-continue` arrive whole; keep-alive and
// pipelined requests are each answered; the server's own refusals (404, 413, 400, a
// handler's exception) carry the error handler's body; stop() lets a running request finish.
#include "serve/http_server.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <numeric>
#include <random>
#include <thread>

using namespace kiln::serve;

namespace {

// A server with a few routes on a free loopback port, listening on its own thread.
struct running_server {
    // `setup` adds routes and hooks of a test's own (before listen(), as the server asks).
    explicit running_server(http_options o = {}, const std::function<void(http_server&)>& setup = {})
        : http(std::move(o)) {
        if (setup) setup(http);
        http.route("POST", "/echo", [this](const http_request& req, http_response& res) {
            ++echoed;
            res.set_content(std::string(req.body), "application/octet-stream");
            res.headers.emplace_back("X-Body-Bytes", std::to_string(req.body.size()));
        });
        http.route("GET", R"(/items/([^/]+)(?:/v/([0-9]+))?)", [](const http_request& req, http_response& res) {
            res.set_content(req.group(1) + "|" + (req.has_group(2) ? req.group(2) : "-") + "|" +
                                req.header("x-Custom").value_or("none"),
                            "text/plain");
        });
        http.route("GET", "/empty-error", [](const http_request&, http_response& res) { res.status = 409; });
        http.route("GET", "/throws", [](const http_request&, http_response&) { throw std::runtime_error("boom"); });
        http.route("GET", "/slow", [this](const http_request&, http_response& res) {
            slow_started = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            res.set_content("done", "text/plain");
        });
        http.set_error_handler([](const http_request& req, http_response& res) {
            if (res.body.empty()) res.set_content("error " + std::to_string(res.status) + " " + req.path, "text/plain");
        });
        http.set_before_body([](const http_request& req, http_response& res) {
            if (req.path != "/echo" || req.header("X-Refuse").value_or("") != "yes") return false;
            res.status = 401;
            res.set_content("refused before the body", "text/plain");
            return true;
        });
        port = http.bind("127.0.0.1", 0);
        thread = std::thread([this] { http.listen(); });
    }
    ~running_server() {
        http.stop();
        thread.join();
    }
    http_server http;
    int port = -1;
    std::thread thread;
    std::atomic<int> echoed{0};
    std::atomic<bool> slow_started{false};
};

// A blocking client socket with a receive timeout, so a test fails instead of hanging.
struct client {
    explicit client(int port) {
        fd = ::socket(AF_INET, SOCK_STREAM, 0);
        timeval tv{10, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(std::uint16_t(port));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        connected = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    }
    ~client() { ::close(fd); }
    void send(const std::string& s) const {
        for (std::size_t sent = 0; sent < s.size();) {
            auto n = ::send(fd, s.data() + sent, s.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) return;
            sent += std::size_t(n);
        }
    }
    // Reads until `want` bytes have come since the last call (or the peer closed).
    std::string read_some(std::size_t want) {
        while (pending.size() < want) {
            char buf[65536];
            auto n = ::recv(fd, buf, sizeof(buf), 0);
            if (n <= 0) break;
            pending.append(buf, std::size_t(n));
        }
        auto out = pending.substr(0, std::min(want, pending.size()));
        pending.erase(0, out.size());
        return out;
    }
    // One response: status line and headers, then Content-Length bytes of body.
    struct response {
        int status = 0;
        std::string head, body;
    };
    response read_response() {
        response r;
        std::size_t end;
        while ((end = pending.find("\r\n\r\n")) == std::string::npos) {
            char buf[65536];
            auto n = ::recv(fd, buf, sizeof(buf), 0);
            if (n <= 0) return r;
            pending.append(buf, std::size_t(n));
        }
        r.head = pending.substr(0, end + 4);
        pending.erase(0, end + 4);
        r.status = std::stoi(r.head.substr(9, 3));
        auto cl = r.head.find("Content-Length: ");
        std::size_t length = cl == std::string::npos ? 0 : std::stoull(r.head.substr(cl + 16));
        r.body = read_some(length);
        return r;
    }
    bool closed_by_peer() {
        char c;
        return pending.empty() && ::recv(fd, &c, 1, 0) == 0;
    }
    int fd = -1;
    bool connected = false;
    std::string pending;
};

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
    return "POST " + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra +
           "\r\n" + body;
}

std::string random_bytes(std::size_t n) {
    std::mt19937 rng(7);
    std::string s(n, '\0');
    for (auto& c : s) c = char(rng());
    return s;
}

}  // namespace

TEST(serve_http_server, keep_alive_and_pipelined_requests_are_each_answered) {
    running_server s;
    ASSERT_GT(s.port, 0);
    client c(s.port);
    ASSERT_TRUE(c.connected);
    c.send(post("/echo", "first"));
    auto r1 = c.read_response();
    EXPECT_EQ(r1.status, 200);
    EXPECT_EQ(r1.body, "first");
    // Two requests in one write: both answered, in order, on the same connection.
    c.send(post("/echo", "second") + post("/echo", "third!"));
    auto r2 = c.read_response(), r3 = c.read_response();
    EXPECT_EQ(r2.body, "second");
    EXPECT_EQ(r3.body, "third!");
    EXPECT_EQ(s.echoed, 3);
}

TEST(serve_http_server, a_large_body_arrives_whole_even_in_pieces) {
    running_server s;
    client c(s.port);
    const auto body = random_bytes(5 << 20);
    const auto request = post("/echo", body);
    // The head and the first bytes, a pause, then the rest in odd pieces.
    c.send(request.substr(0, 1000));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (std::size_t at = 1000; at < request.size(); at += 777777) c.send(request.substr(at, 777777));
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.head.find("X-Body-Bytes: 5242880"), std::string::npos) << r.head;
    EXPECT_TRUE(r.body == body);
}

TEST(serve_http_server, chunked_bodies_and_expect_continue) {
    running_server s;
    client c(s.port);
    c.send(
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n");
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "hello, world");

    // The client waits for 100 Continue before it sends the body.
    c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
    auto cont = c.read_response();
    EXPECT_EQ(cont.status, 100);
    c.send("body");
    auto r2 = c.read_response();
    EXPECT_EQ(r2.status, 200);
    EXPECT_EQ(r2.body, "body");
}

TEST(serve_http_server, routes_match_the_decoded_path_without_its_query) {
    running_server s;
    client c(s.port);
    c.send("GET /items/a%20b/v/3?x=1 HTTP/1.1\r\nHost: t\r\nX-CUSTOM: yes\r\n\r\n");
    EXPECT_EQ(c.read_response().body, "a b|3|yes");
    c.send("GET /items/plain HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(c.read_response().body, "plain|-|none");
}

TEST(serve_http_server, refusals_carry_the_error_handlers_body_and_the_server_stays_up) {
    http_options o;
    o.max_body_bytes = 1000;
    running_server s(o);
    {
        client c(s.port);
        c.send("GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n");
        auto r = c.read_response();
        EXPECT_EQ(r.status, 404);
        EXPECT_EQ(r.body, "error 404 /nothing");
        c.send("POST /items/x HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");  // a route of another method
        EXPECT_EQ(c.read_response().status, 404);
        c.send("GET /empty-error HTTP/1.1\r\nHost: t\r\n\r\n");
        auto e = c.read_response();
        EXPECT_EQ(e.status, 409);
        EXPECT_EQ(e.body, "error 409 /empty-error");
        c.send("GET /throws HTTP/1.1\r\nHost: t\r\n\r\n");
        EXPECT_EQ(c.read_response().status, 500);
    }
    {
        // Too large by its Content-Length: 413 before any of it is read, then the connection ends.
        client c(s.port);
        c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1001\r\n\r\n");
        auto r = c.read_response();
        EXPECT_EQ(r.status, 413);
        EXPECT_EQ(r.body, "error 413 /echo");
        EXPECT_TRUE(c.closed_by_peer());
    }
    {
        client c(s.port);
        c.send("this is not http\r\n\r\n");
        EXPECT_EQ(c.read_response().status, 400);
    }
    {
        // Answered from the head: the handler never runs.
        client c(s.port);
        c.send(post("/echo", std::string(500, 'x'), "X-Refuse: yes\r\n"));
        auto r = c.read_response();
        EXPECT_EQ(r.status, 401);
        EXPECT_EQ(r.body, "refused before the body");
    }
    EXPECT_EQ(s.echoed, 0);
    client c(s.port);
    c.send(post("/echo", "still here"));
    EXPECT_EQ(c.read_response().body, "still here");
}

TEST(serve_http_server, stop_lets_a_running_request_finish) {
    auto s = std::make_unique<running_server>();
    client c(s->port);
    c.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    while (!s->slow_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s.reset();  // stop() and join while /slow runs
    auto r = c.read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "done");
}

TEST(serve_http_server, a_busy_port_is_an_error) {
    running_server s;
    http_server other{http_options{}};
    EXPECT_EQ(other.bind("127.0.0.1", s.port), -1);
    http_options tls;
    tls.tls_cert = "/nonexistent/cert.pem";
    tls.tls_key = "/nonexistent/key.pem";
    http_server bad_tls(tls);
    EXPECT_EQ(bad_tls.bind("127.0.0.1", 0), -1);
}

TEST(serve_http_server, garbage_truncated_and_oversized_requests_leave_it_serving) {
    http_options o;
    o.max_body_bytes = 1 << 20;
    o.read_timeout = std::chrono::seconds(1);
    running_server s(o);
    std::mt19937 rng(11);
    const std::vector<std::string> cases = {
        "GET / HTTP/1.1\r\nHost: t\r\n" + std::string(100000, 'h') + "\r\n\r\n",             // a head over 8 KiB
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nonly this",            // then closed mid-body
        "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n",  // a bad chunk size
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: -4\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "GET /items/x HTTP/9.9\r\n\r\n",
        "\r\n\r\n\r\n",
        "GET /items/%zz%4 HTTP/1.1\r\nHost: t\r\n\r\n",
    };
    for (std::size_t i = 0; i < cases.size() + 40; ++i) {
        std::string request;
        if (i < cases.size()) {
            request = cases[i];
        } else {  // random bytes, some after a valid start
            request = i % 2 ? "POST /echo HTTP/1.1\r\n" : "";
            request += random_bytes(std::size_t(rng() % 3000));
            for (auto& c : request) c = char(c ^ char(rng()));
        }
        {
            client c(s.port);
            c.send(request);
            ::shutdown(c.fd, SHUT_WR);
            c.read_some(1 << 20);  // whatever comes back (an error or nothing) until the server closes
        }
        client c(s.port);
        c.send(post("/echo", "alive"));
        ASSERT_EQ(c.read_response().body, "alive") << "after case " << i;
    }
    EXPECT_GE(s.echoed, int(cases.size()) + 40);
}

TEST(serve_http_server, a_silent_client_is_dropped_after_the_read_timeout) {
    http_options o;
    o.read_timeout = std::chrono::seconds(1);
    running_server s(o);
    client c(s.port);
    c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nab");  // 3 bytes short, then silence
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(c.closed_by_peer());
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GT(waited, std::chrono::milliseconds(800));
    EXPECT_LT(waited, std::chrono::seconds(5));
    EXPECT_EQ(s.echoed, 0);
}

// A body of known length lies where set_body_alignment asks (that offset on 64 bytes), and a
// handler that keeps body_storage keeps the bytes after the answer and the next request.
TEST(serve_http_server, a_body_lies_aligned_where_asked_and_outlives_its_request_while_held) {
    std::shared_ptr<const char> kept;
    std::string_view kept_view;
    running_server s({}, [&](http_server& http) {
        http.set_body_alignment([](const http_request& req) -> std::size_t {
            return std::stoull(req.header("X-Align").value_or("0"));
        });
        http.route("POST", "/keep", [&](const http_request& req, http_response& res) {
            const auto at = std::stoull(req.header("X-Align").value_or("0"));
            res.set_content(std::to_string(reinterpret_cast<std::uintptr_t>(req.body.data() + at) % 64), "text/plain");
            kept = req.body_storage;
            kept_view = req.body;
        });
    });
    client c(s.port);
    const auto body = random_bytes(602112 + 37);
    for (const char* at : {"0", "37", "63", "64", "1000"}) {
        c.send(post("/keep", body, std::string("X-Align: ") + at + "\r\n"));
        auto r = c.read_response();
        EXPECT_EQ(r.status, 200);
        EXPECT_EQ(r.body, "0") << "offset " << at;
    }
    c.send(post("/echo", "something else"));  // another request on the same connection
    EXPECT_EQ(c.read_response().body, "something else");
    ASSERT_TRUE(kept);
    EXPECT_TRUE(kept_view == body);
    // A hint past the end or malformed: the body still arrives whole.
    for (const char* at : {"99999999", "x"}) {
        c.send(post("/echo", "short", std::string("X-Align: ") + at + "\r\n"));
        auto r = c.read_response();
        EXPECT_EQ(r.status, 200);
        EXPECT_EQ(r.body, "short");
    }
}
