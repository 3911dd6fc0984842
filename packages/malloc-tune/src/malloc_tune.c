// glibc's malloc settings that the environment (MALLOC_MMAP_THRESHOLD_) can only give a process at its
// start, set from inside it with mallopt(3). On a C library other than glibc nothing is set.
#include <node_api.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

// setThresholds(mmapBytes, trimBytes): blocks of at least `mmapBytes` are mapped on their own (and unmapped
// when freed), and a heap's free top beyond `trimBytes` is given back. True once glibc took both, false where
// there is no mallopt. index.js passes both.
static napi_value SetThresholds(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_value result;
  int64_t bytes[2] = {0, 0};
  int applied = 0;
  int valid = napi_get_cb_info(env, info, &argc, argv, NULL, NULL) == napi_ok && argc == 2;
  for (size_t i = 0; valid && i < 2; i++) {
    valid = napi_get_value_int64(env, argv[i], &bytes[i]) == napi_ok && bytes[i] > 0 && bytes[i] <= (int64_t)1 << 30;
  }
  if (!valid) {
    napi_throw_range_error(env, NULL, "setThresholds takes two byte counts from 1 to 2^30");
    return NULL;
  }
#if defined(__GLIBC__)
  // Setting the mmap threshold also turns off glibc's dynamic thresholds, which otherwise rise to the size
  // of the largest block freed (up to 32 MB, and the trim threshold to twice that); the trim threshold is
  // set too, in case it rose before this call.
  applied = mallopt(M_MMAP_THRESHOLD, (int)bytes[0]) == 1 && mallopt(M_TRIM_THRESHOLD, (int)bytes[1]) == 1;
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
