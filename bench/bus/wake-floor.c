// wake-floor: what a cross-thread wake-up costs this machine's kernel, with no event loop,
// no V8 and no libuv: the floor under bench/bus/wake.bench.ts (docs/benchmarks.md, "The
// floor of the design"). A producer thread sleeps --gap µs, bumps a counter and wakes a
// consumer thread, --wakes times; the consumer waits
//   mode 0: on the counter with FUTEX_WAIT (what Atomics.wait does),
//   mode 1: in epoll_wait on an eventfd, no timeout (what an idle libuv loop does),
//   mode 2: the same with a 5 s timeout (a loop with a timer armed).
// CPU per thread comes from /proc/thread-self/schedstat (ns on the CPU, kernel included).
//
//   gcc -O2 -pthread bench/bus/wake-floor.c -o /tmp/wake-floor
//   /tmp/wake-floor MODE [gap_us=1000] [wakes=3000]
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int counter;
static int efd, mode, wakes = 3000;
static long consumer_ns;

static long thread_cpu_ns(void) {
  char buf[128];
  long v = 0;
  FILE *f = fopen("/proc/thread-self/schedstat", "r");
  if (f) {
    if (fgets(buf, sizeof buf, f)) v = atol(buf);
    fclose(f);
  }
  return v;
}

static void *consumer(void *arg) {
  (void)arg;
  long start = thread_cpu_ns();
  int seen = 0;
  if (mode == 0) {
    while (seen < wakes) {
      int v = atomic_load(&counter);
      if (v == seen) {
        syscall(SYS_futex, &counter, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
        continue;
      }
      seen = v;
    }
  } else {
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev);
    while (seen < wakes) {
      struct epoll_event out;
      uint64_t n;
      epoll_wait(ep, &out, 1, mode == 1 ? -1 : 5000);
      if (read(efd, &n, sizeof n) < 0) { /* EAGAIN: woken by the timeout */ }
      seen = atomic_load(&counter);
    }
    close(ep);
  }
  consumer_ns = thread_cpu_ns() - start;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || (mode = atoi(argv[1])) < 0 || mode > 2) {
    fprintf(stderr, "usage: %s MODE(0 futex, 1 epoll, 2 epoll with timeout) [gap_us=1000] [wakes=3000]\n", argv[0]);
    return 2;
  }
  int gap_us = argc > 2 ? atoi(argv[2]) : 1000;
  if (argc > 3) wakes = atoi(argv[3]);
  efd = eventfd(0, EFD_NONBLOCK);
  pthread_t t;
  pthread_create(&t, NULL, consumer, NULL);
  usleep(100000); // the consumer is asleep
  long start = thread_cpu_ns();
  for (int i = 1; i <= wakes; i++) {
    struct timespec ts = {gap_us / 1000000, (long)(gap_us % 1000000) * 1000};
    nanosleep(&ts, NULL);
    atomic_store(&counter, i);
    if (mode == 0) {
      syscall(SYS_futex, &counter, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    } else {
      uint64_t one = 1;
      if (write(efd, &one, sizeof one) < 0) perror("write");
    }
  }
  long producer_ns = thread_cpu_ns() - start;
  pthread_join(t, NULL);
  printf("mode %d, %d wake-ups %d us apart: consumer %.1f us of CPU per wake-up, producer %.1f (its own sleep's wake-up included)\n",
         mode, wakes, gap_us, consumer_ns / 1000.0 / wakes, producer_ns / 1000.0 / wakes);
  return 0;
}
