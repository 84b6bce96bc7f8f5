-- Macros of the roofline analysis (docs/roofline.md, analyzers/flops/roofline.py): the op kind
-- of a CPU op name, the bytes of one element of an `Input type`, the elements of one
-- `Input Dims` entry, and the dtype of an op's first tensor. Temporary; reads nothing.

-- gemm, attention and conv are the ops whose FLOPs analyzers/sql/mfu/flops.sql counts;
-- elementwise and normalization ops run against the memory roof.
CREATE OR REPLACE TEMP MACRO rf_kind(name) AS CASE
    WHEN name IN ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::baddbmm', 'aten::linear',
                  'aten::matmul') THEN 'gemm'
    WHEN name IN ('aten::_scaled_dot_product_flash_attention',
                  'aten::_scaled_dot_product_efficient_attention',
                  'aten::_scaled_dot_product_cudnn_attention',
                  'aten::_scaled_dot_product_flash_attention_backward',
                  'aten::_scaled_dot_product_efficient_attention_backward',
                  'aten::_scaled_dot_product_cudnn_attention_backward',
                  'aten::_flash_attention_forward', 'aten::_efficient_attention_forward',
                  'aten::_flash_attention_backward', 'aten::_efficient_attention_backward')
        THEN 'attention'
    WHEN name IN ('aten::convolution', 'aten::convolution_backward') THEN 'conv'
    WHEN regexp_matches(name, '^aten::(native_|_fused_)?(layer_norm|rms_norm|group_norm|batch_norm)(_backward)?$')
      OR regexp_matches(name, '^aten::_?(log_)?softmax(_backward_data)?$')
        THEN 'normalization'
    WHEN regexp_matches(name, '^aten::(native_)?(add|sub|mul|div|neg|exp|log|pow|sqrt|rsqrt|sigmoid|tanh|relu|gelu|silu|threshold|clamp|where|copy|fill|zero|dropout|masked_fill|addcmul|addcdiv|lerp|abs|reciprocal|erf|maximum|minimum|_foreach_[a-z]+)(_backward)?_?$')
        THEN 'elementwise'
END;

-- Bytes of one element; NULL for what is not a tensor (Scalar, ScalarList, TensorList, '').
CREATE OR REPLACE TEMP MACRO rf_elem_bytes(t) AS CASE
    WHEN t IS NULL THEN NULL
    WHEN regexp_matches(lower(t), 'float8') THEN 1
    WHEN regexp_matches(lower(t), 'bfloat16|half|float16') THEN 2
    WHEN lower(t) IN ('float', 'c10::float', 'float32', 'int', 'int32_t', 'unsigned int') THEN 4
    WHEN lower(t) IN ('double', 'c10::double', 'float64', 'long int', 'long', 'int64_t') THEN 8
    WHEN lower(t) IN ('bool', 'unsigned char', 'signed char', 'uint8_t', 'int8_t') THEN 1
    WHEN lower(t) IN ('short int', 'int16_t') THEN 2
END;

-- Elements of one tensor's dims: [512, 128] -> 65536; [] (a 0-d tensor) -> 1.
CREATE OR REPLACE TEMP MACRO rf_numel(d) AS
    list_reduce(list_prepend(1::BIGINT, d), lambda a, b: a * b);

-- The dtype of an op's work: its first tensor input's type (as mfu/matmul_dtype.sql).
CREATE OR REPLACE TEMP MACRO rf_dtype(types) AS
    list_filter(list_transform(types, lambda t:
        CASE
            WHEN regexp_matches(lower(t), 'float8') THEN 'fp8'
            WHEN regexp_matches(lower(t), 'bfloat16') THEN 'bf16'
            WHEN regexp_matches(lower(t), 'half|float16') THEN 'fp16'
            WHEN lower(t) IN ('float', 'c10::float', 'float32') THEN 'fp32'
            WHEN lower(t) IN ('double', 'c10::double', 'float64') THEN 'fp64'
        END), lambda d: d IS NOT NULL)[1];
