package org.pytorch;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/** Working fake: holds the (direct, native-order) buffer it was made from, like pytorch_android's Tensor. */
public final class Tensor {
    private final FloatBuffer floats;
    private final ByteBuffer bytes;
    private final long[] shape;

    private Tensor(FloatBuffer floats, ByteBuffer bytes, long[] shape) {
        this.floats = floats;
        this.bytes = bytes;
        this.shape = shape.clone();
    }

    public static FloatBuffer allocateFloatBuffer(int numElements) {
        return ByteBuffer.allocateDirect(numElements * 4).order(ByteOrder.nativeOrder()).asFloatBuffer();
    }

    public static ByteBuffer allocateByteBuffer(int numElements) {
        return ByteBuffer.allocateDirect(numElements).order(ByteOrder.nativeOrder());
    }

    private static long numel(long[] shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    public static Tensor fromBlob(FloatBuffer data, long[] shape) {
        if (!data.isDirect() || data.capacity() != numel(shape)) {
            throw new IllegalArgumentException("need a direct buffer of " + numel(shape) + " floats");
        }
        return new Tensor(data, null, shape);
    }

    public static Tensor fromBlobUnsigned(ByteBuffer data, long[] shape) {
        if (!data.isDirect() || data.capacity() != numel(shape)) {
            throw new IllegalArgumentException("need a direct buffer of " + numel(shape) + " bytes");
        }
        return new Tensor(null, data, shape);
    }

    public long[] shape() {
        return shape.clone();
    }

    public float[] getDataAsFloatArray() {
        if (floats == null) {
            throw new IllegalStateException("not a float32 tensor");
        }
        float[] out = new float[floats.capacity()];
        for (int i = 0; i < out.length; i++) {
            out[i] = floats.get(i);
        }
        return out;
    }

    public byte[] getDataAsUnsignedByteArray() {
        if (bytes == null) {
            throw new IllegalStateException("not a uint8 tensor");
        }
        byte[] out = new byte[bytes.capacity()];
        for (int i = 0; i < out.length; i++) {
            out[i] = bytes.get(i);
        }
        return out;
    }
}
