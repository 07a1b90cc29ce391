// wsrecv: many Pusher WebSocket subscribers of one channel in one C process, for the
// benchmarks whose subscribers would otherwise be the cap (bench/cluster/: 1,000 × 1,000
// deliveries per second took ~0.7 of a core in the Node generator, loadgen.ts, on a
// 2-core machine that also runs the servers). Driven by bench/harness/cgen.ts.
//
//   wsrecv HOST PORT[,PORT…] PATH CHANNEL COUNT CONCURRENCY
//
// It opens COUNT connections (at most CONCURRENCY upgrades in flight; connection i to
// the (i mod n)-th PORT, so one process can hold the subscribers of several nodes), sends one
// pusher:subscribe to CHANNEL after each pusher:connection_established, then counts
// messages and records their end-to-end latency: the digits after the first '@' of a
// message are the publisher's send time in µs of CLOCK_MONOTONIC (bench/harness/
// protocol.ts nowUs), read against the same clock when the bytes are read. The histogram
// is bench/harness/histogram.ts's (exact below 1,024 µs, then 512 sub-buckets per power
// of two), sent as its sparse form so the orchestrator merges it with the others.
//
// Same wire shortcuts as loadgen.ts: a fixed upgrade request whose answer is only checked
// for "101"; a message is recognised by the byte after `{"event":"` (not 'p': not a
// pusher:… event); client frames are masked with a zero key. It answers WebSocket pings
// and pusher:ping.
//
// Commands, one per line on stdin; each answer is one JSON line on stdout:
//   connect MS         when every connection is subscribed (or failed), or after MS:
//                      {"established":…,"failed":…,"subsConfirmed":…,"subsFailed":…,"timedOut":…}
//   snapshot L R       {"msgs":…,"bytes":…,"t":µs,"cpuUs":…,"closedAfterOpen":…,"errors":{…}
//                      [,"latency":{"buckets":[b,n,…],"max":…,"min":…,"sum":…}]}
//                      L=1 adds the latency histogram, R=1 then resets it
//   pace US            from now on, sleeps US µs after each round of reads (0: never), so
//                      that each read takes in ~US µs of a socket's messages at once: at
//                      1,000 × 1,000+ messages/s a read per message costs this process
//                      more than the server spends sending it (the throughput windows
//                      pace; the latency window does not, so no message waits on it):
//                      {"pace":US}
//   close              closes every socket and exits
// EOF on stdin (the orchestrator went away) exits too.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LINEAR 1024
#define SUB 512
#define BUCKETS (LINEAR + 22 * SUB)

static uint64_t hist[BUCKETS];
static uint64_t hist_total, hist_max, hist_sum;
static uint64_t hist_min = UINT64_MAX;

static unsigned bucket_of(uint64_t v) {
  if (v < LINEAR) return (unsigned)v;
  if (v > 0x7fffffffu) v = 0x7fffffffu;
  uint32_t x = (uint32_t)v;
  int shift = 31 - __builtin_clz(x) - 9;  // x >> shift is in [512, 1023]
  return LINEAR + (unsigned)(shift - 1) * SUB + ((x >> shift) - SUB);
}

static void record(int64_t v) {
  if (v < 0) v = 0;
  hist[bucket_of((uint64_t)v)]++;
  hist_total++;
  hist_sum += (uint64_t)v;
  if ((uint64_t)v > hist_max) hist_max = (uint64_t)v;
  if ((uint64_t)v < hist_min) hist_min = (uint64_t)v;
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

enum { HANDSHAKE, OPEN, CLOSED };

typedef struct {
  int fd;
  int state;
  int est;          // pusher:connection_established seen
  int connecting;   // connect() not finished yet
  char *pend;       // bytes of an incomplete frame (or of the handshake answer)
  size_t plen, pcap;
} Conn;

static Conn *conns;
static int count, concurrency, launched, in_flight;
#define MAX_PORTS 16
static struct sockaddr_in addrs[MAX_PORTS];
static int nports;
static char upgrade[1024];
static size_t upgrade_len;
static char sub_frame[512];
static size_t sub_len;
static int ep;

static uint64_t msgs, bytes_in;
static int established, failed, closed_after_open, subs_confirmed, subs_failed;
static uint64_t err_close, err_http, err_write, err_conn, err_pusher, pusher_pings, ws_pings;
static int closing;
static long pace_us;

// connect waiter
static int waiting_connect;
static int64_t connect_deadline;

static size_t masked_frame(char *out, int opcode, const char *payload, size_t n) {
  size_t hl;
  out[0] = (char)(0x80 | opcode);
  if (n < 126) {
    out[1] = (char)(0x80 | n);
    hl = 2;
  } else {
    out[1] = (char)(0x80 | 126);
    out[2] = (char)(n >> 8);
    out[3] = (char)(n & 0xff);
    hl = 4;
  }
  memset(out + hl, 0, 4);  // zero masking key: the payload goes out as is
  memcpy(out + hl + 4, payload, n);
  return hl + 4 + n;
}

static void send_bytes(Conn *c, const char *b, size_t n) {
  // Small control writes (subscribe, pongs): a full socket buffer here means the
  // server stopped reading, which the counts will show.
  ssize_t w = write(c->fd, b, n);
  if (w != (ssize_t)n) err_write++;
}

static void launch_next(void);

static void close_conn(Conn *c, int was_failure) {
  if (c->state == CLOSED) return;
  int was_est = c->est;
  c->state = CLOSED;
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  free(c->pend);
  c->pend = NULL;
  c->plen = c->pcap = 0;
  if (!was_est) {
    failed++;
    in_flight--;
    launch_next();
  } else if (was_failure && !closing) {
    closed_after_open++;
  }
}

static void open_conn(int i) {
  Conn *c = &conns[i];
  memset(c, 0, sizeof *c);
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    c->state = CLOSED;
    err_conn++;
    failed++;
    in_flight--;
    return;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  c->state = HANDSHAKE;
  c->connecting = 1;
  struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u32 = (uint32_t)i};
  epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  const struct sockaddr_in *addr = &addrs[i % nports];
  if (connect(c->fd, (const struct sockaddr *)addr, sizeof *addr) < 0 && errno != EINPROGRESS) {
    err_conn++;
    close_conn(c, 1);
  }
}

static void launch_next(void) {
  while (in_flight < concurrency && launched < count) {
    in_flight++;
    open_conn(launched++);
  }
}

static int contains(const char *s, size_t n, const char *needle) {
  return memmem(s, n, needle, strlen(needle)) != NULL;
}

static void on_message(const char *s, size_t n, int64_t now) {
  msgs++;
  const char *at = memchr(s, '@', n);
  if (at == NULL) return;
  const char *e = s + n;
  int64_t v = 0;
  const char *p = at + 1;
  for (; p < e && *p >= '0' && *p <= '9'; p++) v = v * 10 + (*p - '0');
  if (p > at + 1) record(now - v);
}

static void on_text(Conn *c, const char *s, size_t n, int64_t now) {
  // Fast path: `{"event":"X…` where X is not 'p' (pusher:…/pusher_internal:…) is a message.
  if (n > 11 && s[2] == 'e' && s[8] == ':' && s[9] == '"' && s[10] != 'p') {
    on_message(s + 10, n - 10, now);
    return;
  }
  if (contains(s, n, "\"pusher:connection_established\"")) {
    if (c->est) return;
    c->est = 1;
    established++;
    in_flight--;
    launch_next();
    send_bytes(c, sub_frame, sub_len);
  } else if (contains(s, n, "\"pusher_internal:subscription_succeeded\"")) {
    subs_confirmed++;
  } else if (contains(s, n, "\"pusher:subscription_error\"")) {
    subs_failed++;
  } else if (contains(s, n, "\"pusher:ping\"")) {
    static char pong[64];
    static size_t pong_len;
    if (pong_len == 0) pong_len = masked_frame(pong, 1, "{\"event\":\"pusher:pong\",\"data\":{}}", 33);
    pusher_pings++;
    send_bytes(c, pong, pong_len);
  } else if (contains(s, n, "\"pusher:error\"")) {
    err_pusher++;
  } else if (!contains(s, n, "\"pusher")) {
    on_message(s, n, now);
  }
}

/** Parses whole frames of buf[0..len); returns how many bytes were used. */
static size_t parse_frames(Conn *c, const char *buf, size_t len, int64_t now) {
  size_t off = 0;
  while (off + 2 <= len) {
    const unsigned char *b = (const unsigned char *)buf + off;
    uint64_t pl = b[1] & 0x7f;
    size_t hl = 2;
    if (pl == 126) {
      if (off + 4 > len) break;
      pl = ((uint64_t)b[2] << 8) | b[3];
      hl = 4;
    } else if (pl == 127) {
      if (off + 10 > len) break;
      pl = 0;
      for (int k = 2; k < 10; k++) pl = (pl << 8) | b[k];
      hl = 10;
    }
    if (off + hl + pl > len) break;
    int op = b[0] & 0x0f;
    const char *p = buf + off + hl;
    if (op == 1) {
      on_text(c, p, (size_t)pl, now);
    } else if (op == 9) {
      char f[140];
      ws_pings++;
      if (pl <= 125) send_bytes(c, f, masked_frame(f, 0xa, p, (size_t)pl));
    } else if (op == 8) {
      err_close++;
      close_conn(c, 1);
      return len;
    }
    if (c->state == CLOSED) return len;
    off += hl + (size_t)pl;
  }
  return off;
}

static void keep(Conn *c, const char *b, size_t n) {
  if (c->plen + n > c->pcap) {
    size_t cap = c->pcap ? c->pcap : 4096;
    while (cap < c->plen + n) cap *= 2;
    c->pend = realloc(c->pend, cap);
    if (c->pend == NULL) {
      perror("wsrecv: realloc");
      exit(1);
    }
    c->pcap = cap;
  }
  memcpy(c->pend + c->plen, b, n);
  c->plen += n;
}

static char rbuf[1 << 18];

static void on_readable(Conn *c) {
  for (;;) {
    ssize_t n = read(c->fd, rbuf, sizeof rbuf);
    if (n == 0) {
      close_conn(c, 1);
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR) continue;
      err_conn++;
      close_conn(c, 1);
      return;
    }
    bytes_in += (uint64_t)n;
    int64_t now = now_us();
    if (c->state == HANDSHAKE) {
      keep(c, rbuf, (size_t)n);
      char *end = memmem(c->pend, c->plen, "\r\n\r\n", 4);
      if (end == NULL) continue;
      if (c->plen < 12 || memcmp(c->pend + 9, "101", 3) != 0) {
        err_http++;
        close_conn(c, 1);
        return;
      }
      c->state = OPEN;
      size_t rest = c->plen - (size_t)(end + 4 - c->pend);
      memmove(c->pend, end + 4, rest);
      c->plen = rest;
      size_t used = parse_frames(c, c->pend, c->plen, now);
      if (c->state == CLOSED) return;
      memmove(c->pend, c->pend + used, c->plen - used);
      c->plen -= used;
      continue;
    }
    if (c->plen > 0) {
      keep(c, rbuf, (size_t)n);
      size_t used = parse_frames(c, c->pend, c->plen, now);
      if (c->state == CLOSED) return;
      memmove(c->pend, c->pend + used, c->plen - used);
      c->plen -= used;
    } else {
      size_t used = parse_frames(c, rbuf, (size_t)n, now);
      if (c->state == CLOSED) return;
      if (used < (size_t)n) keep(c, rbuf + used, (size_t)n - used);
    }
    if ((size_t)n < sizeof rbuf) return;
  }
}

static void on_event(Conn *c, uint32_t events) {
  if (c->state == CLOSED) return;
  if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      err_conn++;
      close_conn(c, 1);
      return;
    }
    c->connecting = 0;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)(c - conns)};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    send_bytes(c, upgrade, upgrade_len);
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c);
}

static void answer_connect(int timed_out) {
  printf("{\"established\":%d,\"failed\":%d,\"subsConfirmed\":%d,\"subsFailed\":%d,\"timedOut\":%s}\n",
         established, failed, subs_confirmed, subs_failed, timed_out ? "true" : "false");
  fflush(stdout);
  waiting_connect = 0;
}

static void check_connect(void) {
  if (!waiting_connect) return;
  if (established + failed >= count && subs_confirmed + subs_failed >= established) answer_connect(0);
  else if (now_us() >= connect_deadline) answer_connect(1);
}

static void snapshot(int latency, int reset) {
  printf("{\"msgs\":%llu,\"bytes\":%llu,\"t\":%lld,\"cpuUs\":%lld,\"closedAfterOpen\":%d,"
         "\"errors\":{\"close\":%llu,\"http\":%llu,\"write\":%llu,\"conn\":%llu,\"pusher_error\":%llu},"
         "\"pusherPings\":%llu,\"wsPings\":%llu",
         (unsigned long long)msgs, (unsigned long long)bytes_in, (long long)now_us(), (long long)cpu_us(),
         closed_after_open, (unsigned long long)err_close, (unsigned long long)err_http,
         (unsigned long long)err_write, (unsigned long long)err_conn, (unsigned long long)err_pusher,
         (unsigned long long)pusher_pings, (unsigned long long)ws_pings);
  if (latency) {
    printf(",\"latency\":{\"buckets\":[");
    int first = 1;
    for (int i = 0; i < BUCKETS; i++) {
      if (hist[i] == 0) continue;
      printf("%s%d,%llu", first ? "" : ",", i, (unsigned long long)hist[i]);
      first = 0;
    }
    printf("],\"max\":%llu,\"min\":%llu,\"sum\":%llu}", (unsigned long long)hist_max,
           (unsigned long long)(hist_total ? hist_min : 0), (unsigned long long)hist_sum);
    if (reset) {
      memset(hist, 0, sizeof hist);
      hist_total = hist_max = hist_sum = 0;
      hist_min = UINT64_MAX;
    }
  }
  printf("}\n");
  fflush(stdout);
}

static char cmdbuf[4096];
static size_t cmdlen;

static void on_command(char *line) {
  if (strncmp(line, "connect ", 8) == 0) {
    connect_deadline = now_us() + (int64_t)atoll(line + 8) * 1000;
    waiting_connect = 1;
    launch_next();
    check_connect();
  } else if (strncmp(line, "snapshot ", 9) == 0) {
    int l = 0, r = 0;
    sscanf(line + 9, "%d %d", &l, &r);
    snapshot(l, r);
  } else if (strncmp(line, "pace ", 5) == 0) {
    pace_us = atol(line + 5);
    if (pace_us < 0) pace_us = 0;
    printf("{\"pace\":%ld}\n", pace_us);
    fflush(stdout);
  } else if (strcmp(line, "close") == 0) {
    closing = 1;
    for (int i = 0; i < launched; i++) close_conn(&conns[i], 0);
    printf("{\"closed\":true}\n");
    fflush(stdout);
    exit(0);
  } else {
    fprintf(stderr, "wsrecv: unknown command \"%s\"\n", line);
    printf("{\"error\":\"unknown command\"}\n");
    fflush(stdout);
  }
}

static void on_stdin(void) {
  ssize_t n = read(0, cmdbuf + cmdlen, sizeof cmdbuf - 1 - cmdlen);
  if (n <= 0) {
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    exit(0);  // the orchestrator went away
  }
  cmdlen += (size_t)n;
  char *nl;
  while ((nl = memchr(cmdbuf, '\n', cmdlen)) != NULL) {
    *nl = 0;
    on_command(cmdbuf);
    size_t used = (size_t)(nl + 1 - cmdbuf);
    memmove(cmdbuf, nl + 1, cmdlen - used);
    cmdlen -= used;
  }
  if (cmdlen == sizeof cmdbuf - 1) cmdlen = 0;  // a line that long is no command
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: wsrecv HOST PORT[,PORT…] PATH CHANNEL COUNT CONCURRENCY\n");
    return 2;
  }
  const char *host = argv[1];
  count = atoi(argv[5]);
  concurrency = atoi(argv[6]);
  if (count <= 0 || concurrency <= 0) {
    fprintf(stderr, "wsrecv: COUNT and CONCURRENCY must be positive\n");
    return 2;
  }
  int port = 0;
  for (char *p = argv[2]; *p;) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v <= 0 || v > 65535 || (*end != ',' && *end != 0) || nports == MAX_PORTS) {
      fprintf(stderr, "wsrecv: PORT must be a list of at most %d ports (1-65535) separated by commas, not \"%s\"\n", MAX_PORTS, argv[2]);
      return 2;
    }
    struct sockaddr_in *a = &addrs[nports++];
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)v);
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) {
      fprintf(stderr, "wsrecv: HOST must be an IPv4 address, not \"%s\"\n", host);
      return 2;
    }
    if (port == 0) port = (int)v;  // the Host header names the first
    p = *end == ',' ? end + 1 : end;
  }
  if (nports == 0) {
    fprintf(stderr, "wsrecv: no PORT given\n");
    return 2;
  }
  int ul = snprintf(upgrade, sizeof upgrade,
                    "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                    argv[3], host, port);
  char sub[400];
  int sl = snprintf(sub, sizeof sub, "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":\"%s\"}}", argv[4]);
  if (ul <= 0 || (size_t)ul >= sizeof upgrade || sl <= 0 || (size_t)sl >= sizeof sub) {
    fprintf(stderr, "wsrecv: PATH or CHANNEL too long\n");
    return 2;
  }
  upgrade_len = (size_t)ul;
  sub_len = masked_frame(sub_frame, 1, sub, (size_t)sl);
  conns = calloc((size_t)count, sizeof *conns);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (conns == NULL || ep < 0) {
    perror("wsrecv");
    return 1;
  }
  fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
  struct epoll_event sev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
  epoll_ctl(ep, EPOLL_CTL_ADD, 0, &sev);
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, waiting_connect ? 50 : -1);
    if (n < 0 && errno != EINTR) {
      perror("wsrecv: epoll_wait");
      return 1;
    }
    for (int i = 0; i < n; i++) {
      if (evs[i].data.u32 == UINT32_MAX) on_stdin();
      else on_event(&conns[evs[i].data.u32], evs[i].events);
    }
    check_connect();
    if (pace_us > 0 && n > 0) {
      struct timespec ts = {.tv_sec = pace_us / 1000000, .tv_nsec = (pace_us % 1000000) * 1000};
      nanosleep(&ts, NULL);
    }
  }
}
