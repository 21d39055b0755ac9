/* The parts of TensorFlow Lite's stable C ABI that acelera's example delegate uses.
 *
 * No package ships TFLite's C headers and LiteRT's libraries export no TfLite* symbols, so
 * these declarations are written here from LiteRT's sources (tflite/core/c/common.h,
 * tflite/core/c/c_api_types.h, tflite/converter/core/c/tflite_types.h,
 * tflite/converter/core/c/builtin_op_data.h, tflite/builtin_ops.h and
 * tflite/delegates/external/external_delegate_interface.h, unchanged from v2.2.0 to the
 * version ai-edge-litert 2.3.0 is built from). Field order and types must match LiteRT's
 * exactly: LiteRT loading and running the delegate is what checks them.
 *
 * Arrays handed to LiteRT (ResizeTensor's new size, the node list given to
 * ReplaceNodeSubsetsWithDelegateKernels) are allocated with malloc: LiteRT frees the ones it
 * takes ownership of with free().
 */
#ifndef ACELERA_TFLITE_ABI_H_
#define ACELERA_TFLITE_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum TfLiteStatus {
  kTfLiteOk = 0,
  kTfLiteError = 1,
  kTfLiteDelegateError = 2,
  kTfLiteApplicationError = 3,
  kTfLiteDelegateDataNotFound = 4,
  kTfLiteDelegateDataWriteError = 5,
  kTfLiteDelegateDataReadError = 6,
  kTfLiteUnresolvedOps = 7,
  kTfLiteCancelled = 8,
  kTfLiteOutputShapeNotKnown = 9,
} TfLiteStatus;

/* Only the type codes the delegate checks; the enum is an int like LiteRT's. */
typedef enum TfLiteType {
  kTfLiteNoType = 0,
  kTfLiteFloat32 = 1,
  kTfLiteInt32 = 2,
  kTfLiteUInt8 = 3,
  kTfLiteInt64 = 4,
  kTfLiteString = 5,
  kTfLiteBool = 6,
  kTfLiteInt16 = 7,
  kTfLiteInt8 = 9,
  kTfLiteFloat16 = 10,
} TfLiteType;

typedef struct TfLiteIntArray {
  int size;
  int data[];
} TfLiteIntArray;

typedef struct TfLiteFloatArray {
  int size;
  float data[];
} TfLiteFloatArray;

typedef struct TfLiteQuantizationParams {
  float scale;
  int32_t zero_point;
} TfLiteQuantizationParams;

typedef enum TfLiteQuantizationType {
  kTfLiteNoQuantization = 0,
  kTfLiteAffineQuantization = 1,
} TfLiteQuantizationType;

typedef struct TfLiteQuantization {
  TfLiteQuantizationType type;
  void* params;
} TfLiteQuantization;

typedef union TfLitePtrUnion {
  int32_t* i32;
  int64_t* i64;
  float* f;
  char* raw;
  const char* raw_const;
  uint8_t* uint8;
  int8_t* int8;
  int16_t* i16;
  void* data;
} TfLitePtrUnion;

typedef enum TfLiteAllocationType {
  kTfLiteMemNone = 0,
  kTfLiteMmapRo,
  kTfLiteArenaRw,
  kTfLiteArenaRwPersistent,
  kTfLiteDynamic,
  kTfLitePersistentRo,
  kTfLiteCustom,
  kTfLiteVariantObject,
  kTfLiteNonCpu,
} TfLiteAllocationType;

typedef int TfLiteBufferHandle;

struct TfLiteContext;
struct TfLiteDelegate;
struct TfLiteRegistration;
struct TfLiteSparsity;
struct TfLiteOperator;
struct TfLiteAsyncKernel;
struct TfLiteOpaqueDelegateBuilder;
struct TfLiteExternalContext;

/* The non-TF_LITE_STATIC_MEMORY layout (the one LiteRT's Python wheel is built with). */
typedef struct TfLiteTensor {
  TfLiteType type;
  TfLitePtrUnion data;
  TfLiteIntArray* dims;
  TfLiteQuantizationParams params;
  TfLiteAllocationType allocation_type;
  size_t bytes;
  const void* allocation;
  const char* name;
  struct TfLiteDelegate* delegate;
  TfLiteBufferHandle buffer_handle;
  bool data_is_stale;
  bool is_variable;
  TfLiteQuantization quantization;
  struct TfLiteSparsity* sparsity;
  const TfLiteIntArray* dims_signature;
} TfLiteTensor;

typedef struct TfLiteNode {
  TfLiteIntArray* inputs;
  TfLiteIntArray* outputs;
  TfLiteIntArray* intermediates;
  TfLiteIntArray* temporaries;
  void* user_data;
  void* builtin_data;
  const void* custom_initial_data;
  int custom_initial_data_size;
  struct TfLiteDelegate* delegate;
  bool might_have_side_effect;
} TfLiteNode;

typedef struct TfLiteDelegateParams {
  struct TfLiteDelegate* delegate;
  TfLiteIntArray* nodes_to_replace;
  TfLiteIntArray* input_tensors;
  TfLiteIntArray* output_tensors;
} TfLiteDelegateParams;

typedef struct TfLiteContext {
  size_t tensors_size;
  TfLiteStatus (*GetExecutionPlan)(struct TfLiteContext* context, TfLiteIntArray** execution_plan);
  TfLiteTensor* tensors;
  void* impl_;
  TfLiteStatus (*ResizeTensor)(struct TfLiteContext*, TfLiteTensor* tensor, TfLiteIntArray* new_size);
  void (*ReportError)(struct TfLiteContext*, const char* msg, ...);
  TfLiteStatus (*AddTensors)(struct TfLiteContext*, int tensors_to_add, int* first_new_tensor_index);
  TfLiteStatus (*GetNodeAndRegistration)(struct TfLiteContext*, int node_index, TfLiteNode** node,
                                         struct TfLiteRegistration** registration);
  TfLiteStatus (*ReplaceNodeSubsetsWithDelegateKernels)(struct TfLiteContext*,
                                                        struct TfLiteRegistration registration,
                                                        const TfLiteIntArray* nodes_to_replace,
                                                        struct TfLiteDelegate* delegate);
  int recommended_num_threads;
  struct TfLiteExternalContext* (*GetExternalContext)(struct TfLiteContext*, int type);
  void (*SetExternalContext)(struct TfLiteContext*, int type, struct TfLiteExternalContext*);
  bool allow_fp32_relax_to_fp16;
  void* profiler;
  void* (*AllocatePersistentBuffer)(struct TfLiteContext* ctx, size_t bytes);
  TfLiteStatus (*AllocateBufferForEval)(struct TfLiteContext* ctx, size_t bytes, void** ptr);
  TfLiteStatus (*RequestScratchBufferInArena)(struct TfLiteContext* ctx, size_t bytes, int* buffer_idx);
  void* (*GetScratchBuffer)(struct TfLiteContext* ctx, int buffer_idx);
  TfLiteStatus (*ResizeTensorExplicit)(struct TfLiteContext* ctx, TfLiteTensor* tensor, int dims,
                                       const int* shape);
  TfLiteStatus (*PreviewDelegatePartitioning)(struct TfLiteContext* context,
                                              const TfLiteIntArray* nodes_to_replace,
                                              TfLiteDelegateParams** partition_params_array,
                                              int* num_partitions);
  TfLiteTensor* (*GetTensor)(const struct TfLiteContext* context, int tensor_idx);
  void* (*GetEvalTensor)(const struct TfLiteContext* context, int tensor_idx);
  TfLiteStatus (*GetModelMetadata)(const struct TfLiteContext* context, const char* name,
                                   const char** ptr, size_t* bytes);
  TfLiteStatus (*AcquireSubgraphContext)(struct TfLiteContext* context, int subgraph_index,
                                         struct TfLiteContext** acquired_context);
  TfLiteStatus (*ReleaseSubgraphContext)(struct TfLiteContext* context, int subgraph_index);
} TfLiteContext;

/* Passed by value to ReplaceNodeSubsetsWithDelegateKernels: its size must be LiteRT's. */
typedef struct TfLiteRegistration {
  void* (*init)(TfLiteContext* context, const char* buffer, size_t length);
  void (*free)(TfLiteContext* context, void* buffer);
  TfLiteStatus (*prepare)(TfLiteContext* context, TfLiteNode* node);
  TfLiteStatus (*invoke)(TfLiteContext* context, TfLiteNode* node);
  const char* (*profiling_string)(const TfLiteContext* context, const TfLiteNode* node);
  int32_t builtin_code;
  const char* custom_name;
  int version;
  struct TfLiteOperator* registration_external;
  struct TfLiteAsyncKernel* (*async_kernel)(TfLiteContext* context, TfLiteNode* node);
  uint64_t inplace_operator;
} TfLiteRegistration;

typedef enum TfLiteDelegateFlags {
  kTfLiteDelegateFlagsNone = 0,
  kTfLiteDelegateFlagsAllowDynamicTensors = 1,
  kTfLiteDelegateFlagsRequirePropagatedShapes = 2,
} TfLiteDelegateFlags;

typedef struct TfLiteDelegate {
  void* data_;
  TfLiteStatus (*Prepare)(TfLiteContext* context, struct TfLiteDelegate* delegate);
  TfLiteStatus (*CopyFromBufferHandle)(TfLiteContext* context, struct TfLiteDelegate* delegate,
                                       TfLiteBufferHandle buffer_handle, TfLiteTensor* tensor);
  TfLiteStatus (*CopyToBufferHandle)(TfLiteContext* context, struct TfLiteDelegate* delegate,
                                     TfLiteBufferHandle buffer_handle, TfLiteTensor* tensor);
  void (*FreeBufferHandle)(TfLiteContext* context, struct TfLiteDelegate* delegate,
                           TfLiteBufferHandle* handle);
  int64_t flags;
  struct TfLiteOpaqueDelegateBuilder* opaque_delegate_builder;
} TfLiteDelegate;

/* Builtin op codes (schema BuiltinOperator) and the option structs the delegate reads. */
enum {
  kTfLiteBuiltinAdd = 0,
  kTfLiteBuiltinMul = 18,
  kTfLiteBuiltinDelegate = 51,
};

typedef enum {
  kTfLiteActNone = 0,
  kTfLiteActRelu,
  kTfLiteActReluN1To1,
  kTfLiteActRelu6,
  kTfLiteActTanh,
  kTfLiteActSignBit,
  kTfLiteActSigmoid,
} TfLiteFusedActivation;

typedef struct {
  TfLiteFusedActivation activation;
  bool pot_scale_int16;
} TfLiteAddParams;

typedef struct {
  TfLiteFusedActivation activation;
} TfLiteMulParams;

/* TFLite's external delegate plugin interface. */
#define ACELERA_EXPORT __attribute__((visibility("default")))

ACELERA_EXPORT TfLiteDelegate* tflite_plugin_create_delegate(const char* const* options_keys,
                                                             const char* const* options_values,
                                                             size_t num_options,
                                                             void (*report_error)(const char*));
ACELERA_EXPORT void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate);

#ifdef __cplusplus
}
#endif

#endif /* ACELERA_TFLITE_ABI_H_ */
