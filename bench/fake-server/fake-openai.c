/*
 * A minimal fake OpenAI streaming server for bench/side-by-side.ts: one thread, one epoll loop,
 * cheap enough per event that the client under test, not the server, is what a run measures.
 *
 *   fake-openai [--port 0] [--ttft-ms 0] [--itl-ms 0] [--tokens-per-event 1] [--events-per-s 0]
 *               [--step-ms 0]
 *               [--model NAME] [--stats FILE]
 *
 * POST /v1/completions and /v1/chat/completions answer `max_tokens` tokens exactly (as
 * ignore_eos would), as text/event-stream in chunked encoding, in vLLM's chunk shapes: token
 * events, the last with finish_reason "length", a usage-only event (`choices: []`), `[DONE]`.
 * GET /v1/models lists the model. HTTP/1.1 keep-alive and one connection per request both work.
 *
 * Schedule: a request's first token event is due --ttft-ms after the request was fully read, each
 * next one --itl-ms after the previous one was due; with --itl-ms 0 a stream writes its next event
 * on the next loop turn after the previous one left (never while its socket is backed up). Due
 * streams sit in a min-heap; epoll_pwait2 sleeps until the earliest due time (nanoseconds).
 * --events-per-s N caps the whole server at N token events a second, evenly spaced, each in a
 * write of its own: below the client's pace every read then carries one event, as when a real
 * engine (or a server slower than the client) paces them, but at a rate a fixed schedule of
 * hundreds of streams would need. A stream held back by the cap counts as late (its lag).
 *
 * --step-ms N paces like an engine that runs its batch in steps: a request's first token comes at
 * the first step end (a multiple of N ms on the server's clock) at least --ttft-ms after it was
 * read, and with --itl-ms > 0 each next one at the first step end at least --itl-ms after the
 * last was due, so (with --itl-ms N) every stream in flight gets its token at the same step's
 * end, as a continuous-batching engine writes them. With --itl-ms 0 only the first is moved.
 * Without it each stream keeps its own phase, set by when its request came: a client whose
 * requests go out together then gets its events together, one whose requests are spread gets
 * them spread, and the two are not measured against the same arrivals.
 *
 * Stdout: "port N" once listening, "first" when the first completion request has been read (the
 * harness reads the client's CPU then). On SIGTERM it writes --stats (below) and exits 0.
 *
 * Stats file: little-endian float64 values, times in microseconds on CLOCK_MONOTONIC. Per request:
 * read_us, events, tokens, request_id (its x-request-id header as a number, -1 without one, so
 * that a client's records join the server's sends per event), then `events` write times (when the event's last byte went to the
 * kernel), then `events` lags (write start minus due time: how late the server ran against its own
 * schedule). A request whose client went away early has events < ceil(tokens / tokens-per-event).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define MAX_HEADER_BYTES 65536
#define MAX_BODY_BYTES (64 * 1024 * 1024)
#define MAX_MODEL_CHARS 200

static int64_t ttft_ns, itl_ns;
/* --step-ms: the engine step every due time is moved up to (0: none). */
static int64_t step_ns;
/* --events-per-s: the least time between two token events of the whole server (0: no cap), and
   when the next may go. */
static int64_t event_gap_ns, next_event_ns;
static int tokens_per_event = 1;
static const char *default_model = "fake-model";
static const char *stats_path;

/* The first step end at or after `due_ns` (itself without --step-ms). */
static int64_t on_step(int64_t due_ns) {
  return step_ns > 0 ? (due_ns + step_ns - 1) / step_ns * step_ns : due_ns;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n);
  if (!p && n) die("realloc");
  return p;
}

/* One request's log, kept until the stats dump. */
struct request_log {
  int64_t read_ns;
  long long request_id; /* the request's x-request-id header as a number, -1 without one */
  int tokens;
  int events; /* events written so far */
  int prompt_tokens; /* words of the prompt (or of the chat messages' contents) */
  int64_t *write_ns;
  int64_t *lag_ns;
};
static struct request_log **logs;
static size_t log_count, log_cap;

struct conn;

struct stream {
  struct conn *conn;
  struct request_log *log;
  int chat;
  int done; /* every event is queued; the response ends once the buffer drains */
  int emitted_tokens;
  int emitted_events;
  int64_t due_ns;
  int heap_index; /* -1 when not scheduled */
  /* Events appended to the output buffer but not yet fully written: their end positions. */
  int64_t *end_pos;
  int first_unsent;
  char id[32];
  char model[MAX_MODEL_CHARS + 1];
  /* Every token event's start, up to the text: `data: {"id":...,"choices":[{"index":0,"text":"`. */
  char head[160 + 32 + MAX_MODEL_CHARS];
  size_t head_len;
};

struct conn {
  int fd;
  char *in;
  size_t in_len, in_cap;
  char *out;
  size_t out_off, out_len, out_cap;
  int64_t written_total; /* bytes handed to the kernel on this connection */
  int64_t queued_total;  /* bytes ever queued on this connection */
  int close_after;       /* close once the current response is out */
  int want_out;          /* EPOLLOUT registered */
  struct stream *stream; /* the response in progress, if any */
};

/* ---- min-heap of streams by due time ---- */
static struct stream **heap;
static int heap_len, heap_cap;

static void heap_swap(int a, int b) {
  struct stream *t = heap[a];
  heap[a] = heap[b];
  heap[b] = t;
  heap[a]->heap_index = a;
  heap[b]->heap_index = b;
}
static void heap_up(int i) {
  while (i > 0) {
    int parent = (i - 1) / 2;
    if (heap[parent]->due_ns <= heap[i]->due_ns) break;
    heap_swap(i, parent);
    i = parent;
  }
}
static void heap_down(int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < heap_len && heap[l]->due_ns < heap[m]->due_ns) m = l;
    if (r < heap_len && heap[r]->due_ns < heap[m]->due_ns) m = r;
    if (m == i) return;
    heap_swap(i, m);
    i = m;
  }
}
static void heap_push(struct stream *s) {
  if (heap_len == heap_cap) {
    heap_cap = heap_cap ? heap_cap * 2 : 1024;
    heap = xrealloc(heap, sizeof *heap * heap_cap);
  }
  heap[heap_len] = s;
  s->heap_index = heap_len++;
  heap_up(s->heap_index);
}
static void heap_remove(struct stream *s) {
  int i = s->heap_index;
  if (i < 0) return;
  s->heap_index = -1;
  if (--heap_len == i) return;
  heap[i] = heap[heap_len];
  heap[i]->heap_index = i;
  heap_up(i);
  heap_down(heap[i]->heap_index);
}

/* ---- output ---- */
static int epfd;

static void set_want_out(struct conn *c, int want) {
  if (c->want_out == want) return;
  struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
  if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) die("epoll_ctl mod");
  c->want_out = want;
}

/* Events of the current stream whose last byte has now reached the kernel get their write time. */
static void stamp_sent_events(struct conn *c, int64_t t) {
  struct stream *s = c->stream;
  if (!s) return;
  while (s->first_unsent < s->emitted_events && s->end_pos[s->first_unsent] <= c->written_total) {
    s->log->write_ns[s->first_unsent++] = t;
  }
}

/* Writes what the buffer holds; returns -1 when the connection is dead. */
static int flush_out(struct conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return -1;
    }
    c->out_off += (size_t)n;
    c->written_total += n;
  }
  stamp_sent_events(c, now_ns());
  if (c->out_off == c->out_len) c->out_off = c->out_len = 0;
  set_want_out(c, c->out_len > 0);
  return 0;
}

static void queue_bytes(struct conn *c, const char *data, size_t n) {
  if (c->out_off > 0 && c->out_off == c->out_len) c->out_off = c->out_len = 0;
  if (c->out_len + n > c->out_cap) {
    if (c->out_off > 0) {
      memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
      c->out_len -= c->out_off;
      c->out_off = 0;
    }
    while (c->out_len + n > c->out_cap) c->out_cap = c->out_cap ? c->out_cap * 2 : 4096;
    c->out = xrealloc(c->out, c->out_cap);
  }
  memcpy(c->out + c->out_len, data, n);
  c->out_len += n;
  c->queued_total += (int64_t)n;
}

/* An HTTP chunk's size line, `<hex>\r\n`, without printf's cost per event. */
static size_t put_chunk_size(char *at, size_t n) {
  char digits[16];
  size_t k = 0;
  do digits[k++] = "0123456789abcdef"[n & 15];
  while (n >>= 4);
  for (size_t i = 0; i < k; i++) at[i] = digits[k - 1 - i];
  at[k] = '\r';
  at[k + 1] = '\n';
  return k + 2;
}

/* One HTTP chunk holding `payload` (one SSE event). */
static void queue_chunk(struct conn *c, const char *payload, size_t n) {
  char size[24];
  queue_bytes(c, size, put_chunk_size(size, n));
  queue_bytes(c, payload, n);
  queue_bytes(c, "\r\n", 2);
}

static void queue_response(struct conn *c, const char *status, const char *type, const char *body) {
  char head[512];
  size_t n = strlen(body);
  int k = snprintf(head, sizeof head,
                   "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s\r\n", status,
                   type, n, c->close_after ? "Connection: close\r\n" : "");
  queue_bytes(c, head, (size_t)k);
  queue_bytes(c, body, n);
}

/* ---- connections ---- */
static void close_conn(struct conn *c) {
  struct stream *s = c->stream;
  if (s) {
    heap_remove(s);
    free(s->end_pos);
    free(s);
  }
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c);
}

static int requests_seen;

static void finish_stream(struct conn *c) {
  struct stream *s = c->stream;
  heap_remove(s);
  free(s->end_pos);
  free(s);
  c->stream = NULL;
}

static int events_for(int tokens) { return (tokens + tokens_per_event - 1) / tokens_per_event; }

/* Writes the stream's next event (with the usage event, [DONE] and the last chunk after the last). */
static size_t put(char *at, const char *text, size_t n) {
  memcpy(at, text, n);
  return n;
}

static int emit_event(struct stream *s, int64_t t) {
  struct conn *c = s->conn;
  struct request_log *log = s->log;
  int remaining = log->tokens - s->emitted_tokens;
  int n = remaining < tokens_per_event ? remaining : tokens_per_event;
  int last = n == remaining;
  /* The event is the stream's rendered head, " tok" per token (the text is the client's cost,
     so it stays short and fixed), and a fixed tail: no formatting per event. */
  static const char tail[] = "\",\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  static const char last_tail[] = "\",\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n";
  static const char chat_tail[] = "\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
  static const char chat_last_tail[] = "\"},\"logprobs\":null,\"finish_reason\":\"length\"}]}\n\n";
  const char *t_text = s->chat ? (last ? chat_last_tail : chat_tail) : (last ? last_tail : tail);
  size_t t_len = s->chat ? (last ? sizeof chat_last_tail : sizeof chat_tail) - 1
                         : (last ? sizeof last_tail : sizeof tail) - 1;
  size_t payload = s->head_len + 4 * (size_t)n + t_len;
  char event[sizeof s->head + 4 * 64 + sizeof chat_last_tail + 24];
  size_t at = put_chunk_size(event, payload);
  at += put(event + at, s->head, s->head_len);
  for (int i = 0; i < n; i++) at += put(event + at, " tok", 4);
  at += put(event + at, t_text, t_len);
  at += put(event + at, "\r\n", 2);
  log->lag_ns[s->emitted_events] = t - s->due_ns;
  queue_bytes(c, event, at);
  s->end_pos[s->emitted_events] = c->queued_total;
  s->emitted_tokens += n;
  s->emitted_events++;
  log->events = s->emitted_events;
  if (last) {
    int k = snprintf(event, sizeof event,
                 "data: {\"id\":\"%s\",\"object\":\"%s\",\"created\":0,\"model\":\"%s\","
                 "\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
                 "\"total_tokens\":%d}}\n\n",
                 s->id, s->chat ? "chat.completion.chunk" : "text_completion", s->model,
                 log->prompt_tokens, log->tokens, log->prompt_tokens + log->tokens);
    queue_chunk(c, event, (size_t)k);
    queue_chunk(c, "data: [DONE]\n\n", 14);
    queue_bytes(c, "0\r\n\r\n", 5);
  }
  if (flush_out(c) < 0) return -1;
  return last;
}

/* The integer after `"key"` and a colon in a JSON text, or `fallback`. */
static long json_int(const char *body, size_t n, const char *key, long fallback) {
  size_t kl = strlen(key);
  const char *end = body + n;
  for (const char *p = memmem(body, n, key, kl); p; p = memmem(p + 1, (size_t)(end - p - 1), key, kl)) {
    const char *q = p + kl;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    if (q >= end || *q != ':') continue;
    q++;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    long v = 0;
    int digits = 0;
    while (q < end && *q >= '0' && *q <= '9' && digits < 12) v = v * 10 + (*q++ - '0'), digits++;
    if (digits) return v;
  }
  return fallback;
}

/* The request's "model" string when it is plain (no escapes), else the default. */
static void json_model(const char *body, size_t n, char *out) {
  const char *end = body + n;
  const char *p = memmem(body, n, "\"model\"", 7);
  if (p) {
    const char *q = p + 7;
    while (q < end && (*q == ' ' || *q == ':' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    if (q < end && *q == '"') {
      const char *v = ++q;
      while (q < end && *q != '"' && *q != '\\' && q - v < MAX_MODEL_CHARS) q++;
      if (q < end && *q == '"') {
        memcpy(out, v, (size_t)(q - v));
        out[q - v] = 0;
        return;
      }
    }
  }
  snprintf(out, MAX_MODEL_CHARS + 1, "%s", default_model);
}

/* Whitespace-separated words in every plain string value of `"key"` (escapes count as letters). */
static int json_words(const char *body, size_t n, const char *key) {
  size_t kl = strlen(key);
  const char *end = body + n;
  int words = 0;
  for (const char *p = memmem(body, n, key, kl); p; p = memmem(p + 1, (size_t)(end - p - 1), key, kl)) {
    const char *q = p + kl;
    while (q < end && (*q == ' ' || *q == ':' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
    if (q >= end || *q != '"') continue;
    int in_word = 0;
    for (q++; q < end && *q != '"'; q++) {
      if (*q == '\\' && q + 1 < end) q++;
      int space = *q == ' ' || *q == '\t' || *q == '\n';
      if (!space && !in_word) words++;
      in_word = !space;
    }
  }
  return words;
}

static int header_has(const char *head, size_t n, const char *name, const char *value) {
  size_t nl = strlen(name);
  const char *end = head + n;
  for (const char *p = head; p < end;) {
    const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
    if (!eol) eol = end;
    if ((size_t)(eol - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
      size_t vl = strlen(value);
      for (const char *v = p + nl + 1; v + vl <= eol; v++)
        if (strncasecmp(v, value, vl) == 0) return 1;
    }
    p = eol + 2;
  }
  return 0;
}

static void start_stream(struct conn *c, const char *body, size_t body_len, int chat, int64_t t,
                         long long request_id) {
  long tokens = json_int(body, body_len, "\"max_tokens\"", -1);
  if (tokens < 0) tokens = json_int(body, body_len, "\"max_completion_tokens\"", 16);
  if (tokens < 1) tokens = 1;
  if (tokens > 1000000) tokens = 1000000;
  struct stream *s = calloc(1, sizeof *s);
  struct request_log *log = calloc(1, sizeof *log);
  if (!s || !log) die("calloc");
  int events = events_for((int)tokens);
  log->read_ns = t;
  log->request_id = request_id;
  log->tokens = (int)tokens;
  log->prompt_tokens = json_words(body, body_len, chat ? "\"content\"" : "\"prompt\"");
  log->write_ns = calloc((size_t)events, sizeof(int64_t));
  log->lag_ns = calloc((size_t)events, sizeof(int64_t));
  s->end_pos = calloc((size_t)events, sizeof(int64_t));
  if (!log->write_ns || !log->lag_ns || !s->end_pos) die("calloc");
  if (log_count == log_cap) {
    log_cap = log_cap ? log_cap * 2 : 4096;
    logs = xrealloc(logs, sizeof *logs * log_cap);
  }
  logs[log_count++] = log;
  s->conn = c;
  s->log = log;
  s->chat = chat;
  s->heap_index = -1;
  snprintf(s->id, sizeof s->id, "%s-%zu", chat ? "chatcmpl" : "cmpl", log_count);
  json_model(body, body_len, s->model);
  s->head_len = (size_t)snprintf(
      s->head, sizeof s->head,
      chat ? "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"%s\","
             "\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
           : "data: {\"id\":\"%s\",\"object\":\"text_completion\",\"created\":0,\"model\":\"%s\","
             "\"choices\":[{\"index\":0,\"text\":\"",
      s->id, s->model);
  c->stream = s;
  char head[256];
  int k = snprintf(head, sizeof head,
                   "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                   "Transfer-Encoding: chunked\r\n%s\r\n",
                   c->close_after ? "Connection: close\r\n" : "");
  queue_bytes(c, head, (size_t)k);
  s->due_ns = on_step(t + ttft_ns);
  heap_push(s);
  if (requests_seen++ == 0) {
    printf("first\n");
    fflush(stdout);
  }
}

/* Parses and answers the requests the input buffer holds; returns -1 to close the connection. */
static int handle_input(struct conn *c, int64_t t) {
  while (!c->stream && c->in_len > 0) {
    char *head_end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!head_end) return c->in_len > MAX_HEADER_BYTES ? -1 : 0;
    size_t head_len = (size_t)(head_end - c->in) + 4;
    long body_len = 0;
    long long request_id = -1;
    /* Content-Length and x-request-id, case-insensitively, at a line start. */
    for (char *p = c->in; p < head_end;) {
      char *eol = memmem(p, (size_t)(head_end + 2 - p), "\r\n", 2);
      if (strncasecmp(p, "content-length:", 15) == 0) body_len = strtol(p + 15, NULL, 10);
      if (strncasecmp(p, "x-request-id:", 13) == 0) {
        char *end;
        long long id = strtoll(p + 13, &end, 10);
        if (end > p + 13 && id >= 0) request_id = id;
      }
      p = eol + 2;
    }
    if (body_len < 0 || body_len > MAX_BODY_BYTES) return -1;
    if (c->in_len < head_len + (size_t)body_len) return 0;
    const char *body = c->in + head_len;
    int http10 = memmem(c->in, head_len, "HTTP/1.0\r\n", 10) != NULL;
    c->close_after = http10 ? !header_has(c->in, head_len, "connection", "keep-alive")
                            : header_has(c->in, head_len, "connection", "close");
    int post = strncmp(c->in, "POST ", 5) == 0;
    int get = strncmp(c->in, "GET ", 4) == 0;
    const char *path = c->in + (post ? 5 : 4);
    if (post && strncmp(path, "/v1/completions ", 16) == 0) {
      start_stream(c, body, (size_t)body_len, 0, t, request_id);
    } else if (post && strncmp(path, "/v1/chat/completions ", 21) == 0) {
      start_stream(c, body, (size_t)body_len, 1, t, request_id);
    } else if (get && strncmp(path, "/v1/models ", 11) == 0) {
      char list[512];
      snprintf(list, sizeof list,
               "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\",\"created\":0,"
               "\"owned_by\":\"fake-openai\"}]}",
               default_model);
      queue_response(c, "200 OK", "application/json", list);
    } else {
      queue_response(c, "404 Not Found", "application/json", "{\"error\":\"not found\"}");
    }
    size_t used = head_len + (size_t)body_len;
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    if (flush_out(c) < 0) return -1;
    if (!c->stream && c->close_after) return c->out_len ? 0 : -1;
  }
  return 0;
}

static int read_input(struct conn *c) {
  for (;;) {
    if (c->in_cap - c->in_len < 4096) {
      c->in_cap = c->in_cap ? c->in_cap * 2 : 16384;
      c->in = xrealloc(c->in, c->in_cap);
    }
    ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
    if (n > 0) {
      c->in_len += (size_t)n;
      continue;
    }
    if (n == 0) return -1;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    return -1;
  }
}

/* The response went out whole: free its stream, then close or start a pipelined request. */
static int end_response(struct conn *c) {
  finish_stream(c);
  if (c->close_after) return -1;
  return c->in_len > 0 ? handle_input(c, now_ns()) : 0;
}

/* Readiness of a client connection; returns -1 when it is to be closed. */
static int on_conn_event(struct conn *c, uint32_t ready, int64_t t) {
  if (ready & (EPOLLERR | EPOLLHUP)) return -1;
  if (ready & EPOLLOUT) {
    if (flush_out(c) < 0) return -1;
    struct stream *s = c->stream;
    if (s && c->out_len == 0) {
      if (s->done) {
        if (end_response(c) < 0) return -1;
      } else if (itl_ns == 0 && s->heap_index < 0) {
        s->due_ns = now_ns();
        heap_push(s);
      }
    }
  }
  /* EOF or a reset: the client went away (mid-stream too; its log shows the events it got). */
  if ((ready & EPOLLIN) && read_input(c) < 0) return -1;
  if (handle_input(c, t) < 0) return -1;
  return !c->stream && c->close_after && c->out_len == 0 ? -1 : 0;
}

/* ---- stats ---- */
static void write_stats(void) {
  if (!stats_path) return;
  FILE *f = fopen(stats_path, "wb");
  if (!f) die(stats_path);
  double *row = NULL;
  size_t row_cap = 0;
  for (size_t i = 0; i < log_count; i++) {
    struct request_log *log = logs[i];
    size_t need = 4 + 2 * (size_t)log->events;
    if (need > row_cap) row = xrealloc(row, sizeof *row * (row_cap = need));
    row[0] = (double)log->read_ns / 1e3;
    row[1] = log->events;
    row[2] = log->tokens;
    row[3] = (double)log->request_id;
    for (int e = 0; e < log->events; e++) {
      row[4 + e] = (double)log->write_ns[e] / 1e3;
      row[4 + log->events + e] = (double)log->lag_ns[e] / 1e3;
    }
    if (fwrite(row, sizeof *row, need, f) != need) die("fwrite");
  }
  if (fclose(f) != 0) die("fclose");
  free(row);
}

static double number_flag(const char *name, const char *value) {
  char *end;
  double v = value ? strtod(value, &end) : -1;
  if (!value || *end || v < 0) {
    fprintf(stderr, "%s: expected a number >= 0, got %s\n", name, value ? value : "nothing");
    exit(2);
  }
  return v;
}

int main(int argc, char **argv) {
  int port = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--port")) port = (int)number_flag(a, v), i++;
    else if (!strcmp(a, "--ttft-ms")) ttft_ns = (int64_t)(number_flag(a, v) * 1e6), i++;
    else if (!strcmp(a, "--itl-ms")) itl_ns = (int64_t)(number_flag(a, v) * 1e6), i++;
    else if (!strcmp(a, "--step-ms")) step_ns = (int64_t)(number_flag(a, v) * 1e6), i++;
    else if (!strcmp(a, "--tokens-per-event")) tokens_per_event = (int)number_flag(a, v), i++;
    else if (!strcmp(a, "--events-per-s")) {
      double rate = number_flag(a, v);
      event_gap_ns = rate > 0 ? (int64_t)(1e9 / rate) : 0;
      i++;
    }
    else if (!strcmp(a, "--model") && v) default_model = v, i++;
    else if (!strcmp(a, "--stats") && v) stats_path = v, i++;
    else {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    }
  }
  if (tokens_per_event < 1 || tokens_per_event > 64) {
    fprintf(stderr, "--tokens-per-event: expected 1 to 64\n");
    return 2;
  }
  if (strlen(default_model) > MAX_MODEL_CHARS) {
    fprintf(stderr, "--model: at most %d characters\n", MAX_MODEL_CHARS);
    return 2;
  }

  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (lfd < 0) die("socket");
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
  if (listen(lfd, 4096) < 0) die("listen");
  socklen_t alen = sizeof addr;
  getsockname(lfd, (struct sockaddr *)&addr, &alen);

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  int sfd = signalfd(-1, &mask, SFD_NONBLOCK);
  epfd = epoll_create1(0);
  if (sfd < 0 || epfd < 0) die("setup");
  /* Wake-ups up to 50 us after a due time may be merged (Linux's default slack, made explicit):
     one wake-up then serves several streams; the log keeps each event's real time and lag. */
  prctl(PR_SET_TIMERSLACK, 50000UL, 0, 0, 0);
  /* The listener and the signal fd are told apart by these tags. */
  static int listen_tag, signal_tag;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_tag};
  epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
  ev.data.ptr = &signal_tag;
  epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev);

  printf("port %d\n", ntohs(addr.sin_port));
  fflush(stdout);

  struct epoll_event events[512];
  struct stream **due = NULL;
  int due_cap = 0;
  for (;;) {
    /* Sleep until the earliest due time; a stream already due makes the wait a poll. */
    struct timespec wait, *timeout = NULL;
    if (heap_len > 0) {
      int64_t next = heap[0]->due_ns;
      if (event_gap_ns > 0 && next_event_ns > next) next = next_event_ns;
      int64_t left = next - now_ns();
      if (left < 0) left = 0;
      wait = (struct timespec){.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
      timeout = &wait;
    }
    int n = epoll_pwait2(epfd, events, 512, timeout, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_pwait2");
    }
    int64_t t = now_ns();
    for (int i = 0; i < n; i++) {
      void *tag = events[i].data.ptr;
      if (tag == &listen_tag) {
        for (;;) {
          int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
          if (fd < 0) break;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct conn *c = calloc(1, sizeof *c);
          if (!c) die("calloc");
          c->fd = fd;
          struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
          epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev);
        }
      } else if (tag == &signal_tag) {
        write_stats();
        return 0;
      } else if (on_conn_event(tag, events[i].events, t) < 0) {
        close_conn(tag);
      }
    }
    /* Take every stream due now off the heap first, so that one with --itl-ms 0 writes one event
       per loop turn and the others get theirs in between. */
    t = now_ns();
    int due_len = 0;
    while (heap_len > 0 && heap[0]->due_ns <= t) {
      if (due_len == due_cap) due = xrealloc(due, sizeof *due * (due_cap = due_cap ? due_cap * 2 : 1024));
      struct stream *s = heap[0];
      heap_remove(s);
      due[due_len++] = s;
    }
    for (int i = 0; i < due_len; i++) {
      struct stream *s = due[i];
      struct conn *c = s->conn;
      int64_t write_start = now_ns();
      if (event_gap_ns > 0) {
        /* Over the cap: this stream and the rest wait for the next slot, in their order. */
        if (write_start < next_event_ns) {
          for (int j = i; j < due_len; j++) heap_push(due[j]);
          break;
        }
        /* A slot missed by less than one gap is made up, never more: no bursts. */
        next_event_ns = (next_event_ns > write_start - event_gap_ns ? next_event_ns : write_start) + event_gap_ns;
      }
      int r = emit_event(s, write_start);
      if (r == 1) {
        s->done = 1;
        if (c->out_len == 0) r = end_response(c);
      } else if (r == 0 && itl_ns > 0) {
        s->due_ns = on_step(s->due_ns + itl_ns);
        heap_push(s);
      } else if (r == 0 && c->out_len == 0) {
        s->due_ns = write_start;
        heap_push(s);
      }
      /* With --itl-ms 0 and the socket backed up, the stream waits for EPOLLOUT (on_conn_event). */
      if (r < 0) close_conn(c);
    }
  }
}
