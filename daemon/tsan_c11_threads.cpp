// Compiled into every program that links sketchd_core, in ThreadSanitizer builds only
// (-DSKETCHD_SANITIZE=thread; see daemon/CMakeLists.txt).
//
// librdkafka starts its threads and takes its locks through C11's <threads.h>. glibc
// implements thrd_create, mtx_* and cnd_* by calling its own pthread internals directly,
// and GCC 12's ThreadSanitizer intercepts only the public pthread functions: it never
// learns of librdkafka's threads, whose first allocation then crashes inside the
// sanitizer's allocator. These definitions, in the executable, take precedence over
// glibc's for librdkafka too, and route every call through the intercepted pthread
// function that glibc's version wraps (a C11 mutex and condition variable have the
// layout of their pthread counterparts in glibc).
#include <pthread.h>
#include <threads.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <new>

namespace {

int c11_status(int pthread_status) {
  switch (pthread_status) {
    case 0:
      return thrd_success;
    case ENOMEM:
      return thrd_nomem;
    case ETIMEDOUT:
      return thrd_timedout;
    case EBUSY:
      return thrd_busy;
    default:
      return thrd_error;
  }
}

// What a C11 thread starts with, handed to the pthread start routine below.
struct start_request {
  thrd_start_t start;
  void* arg;
};

void* run_c11_thread(void* request) {
  const std::unique_ptr<start_request> r(static_cast<start_request*>(request));
  return reinterpret_cast<void*>(static_cast<std::intptr_t>(r->start(r->arg)));
}

pthread_mutex_t* native(mtx_t* m) { return reinterpret_cast<pthread_mutex_t*>(m); }
pthread_cond_t* native(cnd_t* c) { return reinterpret_cast<pthread_cond_t*>(c); }

}  // namespace

extern "C" {

// librdkafka is not instrumented, so the reference counts it keeps with atomic
// instructions are invisible: a message freed by its broker thread after the application
// released it would be reported as a race. With this option the memory accesses of the
// functions an uninstrumented library calls (free, memcpy…) are not checked, while its
// locks still order what happens around them; every access of our own code, callbacks
// run on librdkafka's threads included, is checked. A race ends the process at once
// (exit status 66), so that a test fails even when it does not check how sketchd exited.
const char* __tsan_default_options() { return "ignore_noninstrumented_modules=1 halt_on_error=1"; }

int thrd_create(thrd_t* thread, thrd_start_t start, void* arg) {
  // No exception may leave for librdkafka's C code: out of memory is thrd_nomem.
  std::unique_ptr<start_request> request(new (std::nothrow) start_request{start, arg});
  if (!request) return thrd_nomem;
  const int status = pthread_create(thread, nullptr, run_c11_thread, request.get());
  if (status == 0) request.release();  // the thread owns it now
  return c11_status(status);
}

int thrd_join(thrd_t thread, int* result) {
  void* value = nullptr;
  const int status = pthread_join(thread, &value);
  if (status == 0 && result != nullptr)
    *result = static_cast<int>(reinterpret_cast<std::intptr_t>(value));
  return c11_status(status);
}

int thrd_detach(thrd_t thread) { return c11_status(pthread_detach(thread)); }

int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t attributes;
  pthread_mutexattr_init(&attributes);
  if ((type & mtx_recursive) != 0) pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
  const int status = pthread_mutex_init(native(m), &attributes);
  pthread_mutexattr_destroy(&attributes);
  return c11_status(status);
}

int mtx_lock(mtx_t* m) { return c11_status(pthread_mutex_lock(native(m))); }
int mtx_trylock(mtx_t* m) { return c11_status(pthread_mutex_trylock(native(m))); }
int mtx_timedlock(mtx_t* __restrict m, const struct timespec* __restrict deadline) {
  return c11_status(pthread_mutex_timedlock(native(m), deadline));
}
int mtx_unlock(mtx_t* m) { return c11_status(pthread_mutex_unlock(native(m))); }
void mtx_destroy(mtx_t* m) { pthread_mutex_destroy(native(m)); }

int cnd_init(cnd_t* c) { return c11_status(pthread_cond_init(native(c), nullptr)); }
int cnd_signal(cnd_t* c) { return c11_status(pthread_cond_signal(native(c))); }
int cnd_broadcast(cnd_t* c) { return c11_status(pthread_cond_broadcast(native(c))); }
int cnd_wait(cnd_t* c, mtx_t* m) { return c11_status(pthread_cond_wait(native(c), native(m))); }
int cnd_timedwait(cnd_t* __restrict c, mtx_t* __restrict m,
                  const struct timespec* __restrict deadline) {
  return c11_status(pthread_cond_timedwait(native(c), native(m), deadline));
}
void cnd_destroy(cnd_t* c) { pthread_cond_destroy(native(c)); }

}  // extern "C"
