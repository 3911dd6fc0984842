// glibc's malloc settings that the environment (MALLOC_MMAP_THRESHOLD_) can only give a process at its
// start, set from inside it with mallopt(3). On a C library other than glibc nothing is set.
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

// setThresholds(bytes): blocks of at least `bytes` are mapped on their own (and unmapped when freed), and a
// heap's free top beyond `bytes` is given back. True once glibc took both, false where there is no mallopt.
static napi_value SetThresholds(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_value result;
  int64_t bytes = 0;
  int applied = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int64(env, argv[0], &bytes) != napi_ok || bytes <= 0 || bytes > (int64_t)1 << 30) {
    napi_throw_range_error(env, NULL, "setThresholds takes a byte count from 1 to 2^30");
    return NULL;
  }
#if defined(__GLIBC__)
  // Setting the threshold also turns off glibc's dynamic threshold, which otherwise rises to the size of
  // the largest block freed (up to 32 MB) and takes the trim threshold (twice that) with it; the trim
  // threshold is set too, in case it rose before this call.
  applied = mallopt(M_MMAP_THRESHOLD, (int)bytes) == 1 && mallopt(M_TRIM_THRESHOLD, (int)bytes) == 1;
#endif
  napi_get_boolean(env, applied, &result);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "setThresholds", NAPI_AUTO_LENGTH, SetThresholds, NULL, &fn);
  napi_set_named_property(env, exports, "setThresholds", fn);
  return exports;
}
