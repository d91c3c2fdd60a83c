package {{ cookiecutter.application_id }};

/** The values `invoke make-app` filled in for this app; everything else is plain code. */
final class AppConfig {
    private AppConfig() {}

    /** The converted variant this app packages (quant_none, quant_core or quant_full). */
    static final String VARIANT = {{ cookiecutter.variant | java_string }};

    /** "float32": NCHW float input normalised in Java; "uint8_lut": NHWC uint8 through the lookup table. */
    static final String INPUT_MODE = {{ cookiecutter.input_mode | java_string }};

    static final String MODEL_CPU_ASSET = {{ cookiecutter.model_cpu_asset | java_string }};
    /** Empty when the variant has no NNAPI model. */
    static final String MODEL_NNAPI_ASSET = {{ cookiecutter.model_nnapi_asset | java_string }};
    static final String LABELS_ASSET = {{ cookiecutter.labels_asset | java_string }};
    static final String SAMPLE_ASSET = {{ cookiecutter.sample_asset | java_string }};
    /** 3 x 256 bytes: quantized value of each 8-bit R, G, B pixel value (uint8_lut input only). */
    static final String LUT_ASSET = {{ cookiecutter.lut_asset | java_string }};

    static final int INPUT_SIZE = {{ cookiecutter.input_size | java_int }};
    static final int NUM_CLASSES = {{ cookiecutter.num_classes | java_int }};
    static final float[] MEAN = {{ cookiecutter.mean | java_float_array }};
    static final float[] STD = {{ cookiecutter.std | java_float_array }};

    /** NNAPI as PyTorch uses it needs Android 10; below it the app runs the CPU model. */
    static final int NNAPI_MIN_SDK = {{ cookiecutter.nnapi_min_sdk | java_int }};

    /** The in-app benchmark's logcat tag and line prefix (the contract `invoke deploy` reads). */
    static final String BENCH_TAG = {{ cookiecutter.bench_tag | java_string }};
    static final String BENCH_PREFIX = {{ cookiecutter.bench_prefix | java_string }};
}
