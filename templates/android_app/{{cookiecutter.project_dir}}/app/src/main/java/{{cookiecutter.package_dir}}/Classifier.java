package {{ cookiecutter.application_id }};

import android.graphics.Bitmap;
import java.nio.ByteBuffer;
import java.nio.FloatBuffer;
{%- if cookiecutter.runtime_library == "executorch" %}
import org.pytorch.executorch.EValue;
import org.pytorch.executorch.Module;
import org.pytorch.executorch.Tensor;
{%- else %}
import org.pytorch.IValue;
import org.pytorch.Module;
import org.pytorch.Tensor;
{%- endif %}

/**
 * One loaded model with its input buffer and input Tensor. Both are allocated once, here, and refilled in
 * place for every frame (the PyTorch Mobile performance recipe): no allocation per inference on the Java side.
 */
final class Classifier {
    /** "cpu" or "nnapi". */
    final String backend;

    private final Module module;
    private final int size;
    private final int[] pixels;
    private final byte[] lut;
    private final ByteBuffer byteInput;
    private final FloatBuffer floatInput;
    private final Tensor inputTensor;
    private final float[] scale = new float[3];
    private final float[] bias = new float[3];

    /**
     * @param lut null for float32 models; for uint8_lut models the 3 x 256 table mapping an 8-bit
     *     channel value to the model's quantized input value (normalisation and quantization folded in).
     */
    Classifier(String backend, String modelPath, byte[] lut) {
        this.backend = backend;
        this.size = AppConfig.INPUT_SIZE;
        this.pixels = new int[size * size];
        this.lut = lut;
        this.module = Module.load(modelPath);
        if (lut != null) {
            if (lut.length != 3 * 256) {
                throw new IllegalArgumentException("lookup table has " + lut.length + " bytes, expected 768");
            }
            byteInput = Tensor.allocateByteBuffer(3 * size * size);
            floatInput = null;
            inputTensor = Tensor.fromBlobUnsigned(byteInput, new long[] {1, size, size, 3});
        } else {
            floatInput = Tensor.allocateFloatBuffer(3 * size * size);
            byteInput = null;
            inputTensor = Tensor.fromBlob(floatInput, new long[] {1, 3, size, size});
            for (int c = 0; c < 3; c++) {
                scale[c] = 1f / (255f * AppConfig.STD[c]);
                bias[c] = -AppConfig.MEAN[c] / AppConfig.STD[c];
            }
        }
    }

    /** Refill the input buffer in place from a size x size ARGB_8888 bitmap. */
    void fill(Bitmap frame) {
        frame.getPixels(pixels, 0, size, 0, 0, size, size);
        final int plane = size * size;
        if (byteInput != null) {
            for (int i = 0; i < plane; i++) {
                final int p = pixels[i];
                final int o = 3 * i;
                byteInput.put(o, lut[(p >> 16) & 0xff]);
                byteInput.put(o + 1, lut[256 + ((p >> 8) & 0xff)]);
                byteInput.put(o + 2, lut[512 + (p & 0xff)]);
            }
        } else {
            for (int i = 0; i < plane; i++) {
                final int p = pixels[i];
                floatInput.put(i, ((p >> 16) & 0xff) * scale[0] + bias[0]);
                floatInput.put(plane + i, ((p >> 8) & 0xff) * scale[1] + bias[1]);
                floatInput.put(2 * plane + i, (p & 0xff) * scale[2] + bias[2]);
            }
        }
    }

    /** Run the model on the current buffer contents and return the class scores. */
    float[] run() {
{%- if cookiecutter.runtime_library == "executorch" %}
        // ExecuTorch's forward returns every output of the program; a classifier has one.
        final Tensor out = module.forward(EValue.from(inputTensor))[0].toTensor();
{%- else %}
        final Tensor out = module.forward(IValue.from(inputTensor)).toTensor();
{%- endif %}
        return out.getDataAsFloatArray();
    }

    void close() {
        module.destroy();
    }
}
