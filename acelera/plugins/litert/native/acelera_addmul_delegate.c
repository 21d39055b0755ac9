/* acelera's example external TFLite delegate: float32 ADD and MUL (fused activation NONE or
 * RELU, numpy-style broadcasting up to rank 8) computed in plain C.
 *
 * It exports TFLite's external delegate plugin interface (tflite_plugin_create_delegate /
 * tflite_plugin_destroy_delegate), so LiteRT loads it with
 * ai_edge_litert.interpreter.load_delegate(path, options) and acelera hosts it with
 * --external_delegate_path. It uses only the C ABI declared in tflite_abi.h.
 *
 * Options (key: value):
 *   ops: which ops to take, "add", "mul" or "add,mul" (default)
 * An unknown key or value makes creation fail with a message through report_error.
 *
 * Kernel: each delegated partition becomes one kernel that runs its nodes in order. Tensors
 * produced and consumed inside the partition get buffers owned by the kernel (LiteRT's arena
 * does not allocate them); partition outputs are resized through ResizeTensor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tflite_abi.h"

#define MAX_RANK 8
#define OP_ADD 1
#define OP_MUL 2
#define MAX_VERSION 2

typedef struct {
  int ops; /* OP_ADD | OP_MUL */
} DelegateData;

typedef struct {
  int kind; /* OP_ADD or OP_MUL */
  int in0, in1, out;
  int relu;
} Step;

typedef struct {
  int rank;
  int dims[MAX_RANK];
} Shape;

typedef struct {
  int n_steps;
  Step* steps;
  int n_tensors;       /* context->tensors_size when prepared */
  float** own;         /* tensor index -> kernel-owned buffer (internal tensors), or NULL */
  size_t* own_size;    /* elements allocated in own[i] */
  Shape* shapes;       /* tensor index -> shape computed at prepare */
  char* produced;      /* tensor index -> 1 when a step of this kernel writes it */
} Kernel;

static int kind_of(const TfLiteRegistration* reg) {
  if (reg->builtin_code == kTfLiteBuiltinAdd) return OP_ADD;
  if (reg->builtin_code == kTfLiteBuiltinMul) return OP_MUL;
  return 0;
}

static int activation_of(const TfLiteNode* node, int kind) {
  if (node->builtin_data == NULL) return kTfLiteActNone;
  if (kind == OP_ADD) return ((const TfLiteAddParams*)node->builtin_data)->activation;
  return ((const TfLiteMulParams*)node->builtin_data)->activation;
}

static int is_float_tensor(const TfLiteContext* context, int t) {
  return t >= 0 && (size_t)t < context->tensors_size && context->tensors[t].type == kTfLiteFloat32 &&
         context->tensors[t].dims != NULL && context->tensors[t].dims->size <= MAX_RANK;
}

static int broadcastable(const TfLiteIntArray* a, const TfLiteIntArray* b) {
  int ra = a->size, rb = b->size;
  int r = ra > rb ? ra : rb;
  for (int i = 0; i < r; ++i) {
    int da = i < r - ra ? 1 : a->data[i - (r - ra)];
    int db = i < r - rb ? 1 : b->data[i - (r - rb)];
    if (da != db && da != 1 && db != 1) return 0;
  }
  return 1;
}

static int takes_node(const TfLiteContext* context, const TfLiteNode* node, const TfLiteRegistration* reg,
                      const DelegateData* data) {
  int kind = kind_of(reg);
  if (kind == 0 || !(data->ops & kind)) return 0;
  if (reg->version < 1 || reg->version > MAX_VERSION) return 0;
  if (node->inputs->size != 2 || node->outputs->size != 1) return 0;
  int a = node->inputs->data[0], b = node->inputs->data[1], o = node->outputs->data[0];
  if (!is_float_tensor(context, a) || !is_float_tensor(context, b) || !is_float_tensor(context, o)) return 0;
  int act = activation_of(node, kind);
  if (act != kTfLiteActNone && act != kTfLiteActRelu) return 0;
  return broadcastable(context->tensors[a].dims, context->tensors[b].dims);
}

/* --- the kernel ------------------------------------------------------------------------------ */

static void* kernel_init(TfLiteContext* context, const char* buffer, size_t length) {
  (void)length;
  const TfLiteDelegateParams* params = (const TfLiteDelegateParams*)buffer;
  Kernel* k = (Kernel*)calloc(1, sizeof(Kernel));
  if (k == NULL) return NULL;
  int n = params->nodes_to_replace->size;
  k->steps = (Step*)calloc(n > 0 ? n : 1, sizeof(Step));
  if (k->steps == NULL) {
    free(k);
    return NULL;
  }
  for (int i = 0; i < n; ++i) {
    TfLiteNode* node = NULL;
    TfLiteRegistration* reg = NULL;
    if (context->GetNodeAndRegistration(context, params->nodes_to_replace->data[i], &node, &reg) != kTfLiteOk) {
      context->ReportError(context, "acelera_addmul: cannot read node %d", params->nodes_to_replace->data[i]);
      continue;
    }
    Step* s = &k->steps[k->n_steps++];
    s->kind = kind_of(reg);
    s->in0 = node->inputs->data[0];
    s->in1 = node->inputs->data[1];
    s->out = node->outputs->data[0];
    s->relu = activation_of(node, s->kind) == kTfLiteActRelu;
  }
  return k;
}

static void release_buffers(Kernel* k) {
  if (k->own != NULL) {
    for (int i = 0; i < k->n_tensors; ++i) free(k->own[i]);
  }
  free(k->own);
  free(k->own_size);
  free(k->shapes);
  free(k->produced);
  k->own = NULL;
  k->own_size = NULL;
  k->shapes = NULL;
  k->produced = NULL;
  k->n_tensors = 0;
}

static void kernel_free(TfLiteContext* context, void* buffer) {
  (void)context;
  Kernel* k = (Kernel*)buffer;
  if (k == NULL) return;
  release_buffers(k);
  free(k->steps);
  free(k);
}

static int contains(const TfLiteIntArray* a, int v) {
  for (int i = 0; i < a->size; ++i)
    if (a->data[i] == v) return 1;
  return 0;
}

static size_t elements(const Shape* s) {
  size_t n = 1;
  for (int i = 0; i < s->rank; ++i) n *= (size_t)s->dims[i];
  return n;
}

static TfLiteStatus kernel_prepare(TfLiteContext* context, TfLiteNode* node) {
  Kernel* k = (Kernel*)node->user_data;
  if (k == NULL) return kTfLiteError;
  int n = (int)context->tensors_size;
  if (k->n_tensors != n) {
    release_buffers(k);
    k->own = (float**)calloc(n, sizeof(float*));
    k->own_size = (size_t*)calloc(n, sizeof(size_t));
    k->shapes = (Shape*)calloc(n, sizeof(Shape));
    k->produced = (char*)calloc(n, 1);
    if (!k->own || !k->own_size || !k->shapes || !k->produced) {
      release_buffers(k);
      return kTfLiteError;
    }
    k->n_tensors = n;
  }
  memset(k->produced, 0, n);
  for (int i = 0; i < k->n_steps; ++i) {
    const Step* s = &k->steps[i];
    Shape in[2];
    int ids[2] = {s->in0, s->in1};
    for (int j = 0; j < 2; ++j) {
      if (k->produced[ids[j]]) {
        in[j] = k->shapes[ids[j]];
      } else {
        const TfLiteIntArray* d = context->tensors[ids[j]].dims;
        in[j].rank = d->size;
        for (int r = 0; r < d->size; ++r) in[j].dims[r] = d->data[r];
      }
    }
    Shape out;
    out.rank = in[0].rank > in[1].rank ? in[0].rank : in[1].rank;
    for (int r = 0; r < out.rank; ++r) {
      int da = r < out.rank - in[0].rank ? 1 : in[0].dims[r - (out.rank - in[0].rank)];
      int db = r < out.rank - in[1].rank ? 1 : in[1].dims[r - (out.rank - in[1].rank)];
      if (da != db && da != 1 && db != 1) {
        context->ReportError(context, "acelera_addmul: shapes of tensors %d and %d do not broadcast", s->in0,
                             s->in1);
        return kTfLiteError;
      }
      out.dims[r] = da == 1 ? db : da;
    }
    k->shapes[s->out] = out;
    k->produced[s->out] = 1;
    if (contains(node->outputs, s->out)) {
      TfLiteIntArray* dims = (TfLiteIntArray*)malloc(sizeof(TfLiteIntArray) + sizeof(int) * out.rank);
      if (dims == NULL) return kTfLiteError;
      dims->size = out.rank;
      for (int r = 0; r < out.rank; ++r) dims->data[r] = out.dims[r];
      if (context->ResizeTensor(context, &context->tensors[s->out], dims) != kTfLiteOk) return kTfLiteError;
    } else {
      size_t need = elements(&out);
      if (need > k->own_size[s->out] || k->own[s->out] == NULL) {
        float* p = (float*)realloc(k->own[s->out], (need > 0 ? need : 1) * sizeof(float));
        if (p == NULL) return kTfLiteError;
        k->own[s->out] = p;
        k->own_size[s->out] = need;
      }
    }
  }
  return kTfLiteOk;
}

static const float* read_ptr(const Kernel* k, TfLiteContext* context, int t) {
  return k->own[t] != NULL && k->produced[t] ? k->own[t] : context->tensors[t].data.f;
}

static Shape shape_of(const Kernel* k, TfLiteContext* context, int t) {
  if (k->produced[t]) return k->shapes[t];
  Shape s;
  const TfLiteIntArray* d = context->tensors[t].dims;
  s.rank = d->size;
  for (int r = 0; r < d->size; ++r) s.dims[r] = d->data[r];
  return s;
}

/* Element strides of `in` aligned to the output's rank; 0 along broadcast dimensions. */
static void broadcast_strides(const Shape* in, const Shape* out, size_t* strides) {
  size_t stride = 1;
  for (int r = out->rank - 1; r >= 0; --r) {
    int ir = r - (out->rank - in->rank);
    if (ir < 0) {
      strides[r] = 0;
      continue;
    }
    strides[r] = in->dims[ir] == 1 ? 0 : stride;
    stride *= (size_t)in->dims[ir];
  }
}

static TfLiteStatus kernel_invoke(TfLiteContext* context, TfLiteNode* node) {
  Kernel* k = (Kernel*)node->user_data;
  if (k == NULL || k->shapes == NULL) return kTfLiteError;
  for (int i = 0; i < k->n_steps; ++i) {
    const Step* s = &k->steps[i];
    const float* a = read_ptr(k, context, s->in0);
    const float* b = read_ptr(k, context, s->in1);
    float* o = k->own[s->out] != NULL && !contains(node->outputs, s->out) ? k->own[s->out]
                                                                          : context->tensors[s->out].data.f;
    Shape sa = shape_of(k, context, s->in0), sb = shape_of(k, context, s->in1);
    const Shape* so = &k->shapes[s->out];
    size_t total = elements(so);
    if (total == 0) continue;
    if (a == NULL || b == NULL || o == NULL) {
      context->ReportError(context, "acelera_addmul: a tensor of step %d has no data", i);
      return kTfLiteError;
    }
    size_t ta[MAX_RANK], tb[MAX_RANK];
    int idx[MAX_RANK];
    broadcast_strides(&sa, so, ta);
    broadcast_strides(&sb, so, tb);
    memset(idx, 0, sizeof(idx));
    size_t pa = 0, pb = 0;
    for (size_t e = 0; e < total; ++e) {
      float v = s->kind == OP_ADD ? a[pa] + b[pb] : a[pa] * b[pb];
      if (s->relu && v < 0.0f) v = 0.0f;
      o[e] = v;
      for (int r = so->rank - 1; r >= 0; --r) {
        if (++idx[r] < so->dims[r]) {
          pa += ta[r];
          pb += tb[r];
          break;
        }
        pa -= ta[r] * (size_t)(so->dims[r] - 1);
        pb -= tb[r] * (size_t)(so->dims[r] - 1);
        idx[r] = 0;
      }
    }
  }
  return kTfLiteOk;
}

/* --- the delegate ---------------------------------------------------------------------------- */

static TfLiteStatus delegate_prepare(TfLiteContext* context, TfLiteDelegate* delegate) {
  const DelegateData* data = (const DelegateData*)delegate->data_;
  TfLiteIntArray* plan = NULL;
  if (context->GetExecutionPlan(context, &plan) != kTfLiteOk) return kTfLiteError;
  TfLiteIntArray* take = (TfLiteIntArray*)malloc(sizeof(TfLiteIntArray) + sizeof(int) * (plan->size + 1));
  if (take == NULL) return kTfLiteError;
  take->size = 0;
  for (int i = 0; i < plan->size; ++i) {
    TfLiteNode* node = NULL;
    TfLiteRegistration* reg = NULL;
    if (context->GetNodeAndRegistration(context, plan->data[i], &node, &reg) != kTfLiteOk) continue;
    if (takes_node(context, node, reg, data)) take->data[take->size++] = plan->data[i];
  }
  TfLiteStatus status = kTfLiteOk;
  if (take->size > 0) {
    TfLiteRegistration kernel;
    memset(&kernel, 0, sizeof(kernel));
    kernel.init = kernel_init;
    kernel.free = kernel_free;
    kernel.prepare = kernel_prepare;
    kernel.invoke = kernel_invoke;
    kernel.builtin_code = kTfLiteBuiltinDelegate;
    kernel.custom_name = "AceleraAddMul";
    kernel.version = 1;
    status = context->ReplaceNodeSubsetsWithDelegateKernels(context, kernel, take, delegate);
  }
  free(take);
  return status;
}

static void report(void (*report_error)(const char*), const char* fmt, const char* a, const char* b) {
  char msg[512];
  snprintf(msg, sizeof(msg), fmt, a, b);
  if (report_error != NULL) report_error(msg);
}

static int parse_ops(const char* value) {
  int ops = 0;
  const char* p = value;
  while (*p) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 3 && strncmp(p, "add", 3) == 0) ops |= OP_ADD;
    else if (len == 3 && strncmp(p, "mul", 3) == 0) ops |= OP_MUL;
    else return -1;
    p += len + (end ? 1 : 0);
  }
  return ops;
}

TfLiteDelegate* tflite_plugin_create_delegate(const char* const* options_keys, const char* const* options_values,
                                              size_t num_options, void (*report_error)(const char*)) {
  int ops = OP_ADD | OP_MUL;
  int n = (int)num_options; /* Python's ctypes passes a C int here */
  for (int i = 0; i < n; ++i) {
    const char* key = options_keys[i];
    const char* value = options_values[i];
    if (strcmp(key, "ops") == 0) {
      ops = parse_ops(value);
      if (ops <= 0) {
        report(report_error, "acelera_addmul: option ops='%s' must list add and/or mul%s", value, "");
        return NULL;
      }
    } else {
      report(report_error, "acelera_addmul: unknown option '%s' (known: %s)", key, "ops");
      return NULL;
    }
  }
  DelegateData* data = (DelegateData*)calloc(1, sizeof(DelegateData));
  TfLiteDelegate* delegate = (TfLiteDelegate*)calloc(1, sizeof(TfLiteDelegate));
  if (data == NULL || delegate == NULL) {
    free(data);
    free(delegate);
    report(report_error, "acelera_addmul: out of memory%s%s", "", "");
    return NULL;
  }
  data->ops = ops;
  delegate->data_ = data;
  delegate->Prepare = delegate_prepare;
  delegate->flags = kTfLiteDelegateFlagsNone;
  return delegate;
}

void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate) {
  if (delegate == NULL) return;
  free(delegate->data_);
  free(delegate);
}
