package org.pytorch.executorch;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * Working fake of executorch-android's Tensor: fromBlob on a buffer keeps that buffer (no copy) and checks what the
 * real one checks (Tensor.kt fromBlob(FloatBuffer): capacity == numel(shape), a direct buffer, native byte order).
 */
public abstract class Tensor {
    private final long[] shape;

    Tensor(long[] shape) {
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("Shape elements must be non negative");
            }
        }
        this.shape = shape.clone();
    }

    public static ByteBuffer allocateByteBuffer(int numElements) {
        return ByteBuffer.allocateDirect(numElements).order(ByteOrder.nativeOrder());
    }

    public static FloatBuffer allocateFloatBuffer(int numElements) {
        return ByteBuffer.allocateDirect(numElements * 4).order(ByteOrder.nativeOrder()).asFloatBuffer();
    }

    static long numel(long[] shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        return n;
    }

    private static void check(boolean ok, String message) {
        if (!ok) {
            throw new IllegalArgumentException(message);
        }
    }

    public static Tensor fromBlob(float[] data, long[] shape) {
        check(data.length == numel(shape), "Inconsistent data capacity and shape number elements");
        final FloatBuffer b = allocateFloatBuffer(data.length);
        b.put(data);
        return new Floats(b, shape);
    }

    public static Tensor fromBlob(FloatBuffer data, long[] shape) {
        check(data.capacity() == numel(shape), "Inconsistent data capacity:" + data.capacity()
                + " and shape number elements:" + numel(shape));
        check(data.isDirect(), "Data buffer must be direct (java.nio.ByteBuffer#allocateDirect)");
        check(data.order() == ByteOrder.nativeOrder(), "Data buffer must have native byte order");
        return new Floats(data, shape);
    }

    public static Tensor fromBlobUnsigned(byte[] data, long[] shape) {
        check(data.length == numel(shape), "Inconsistent data capacity and shape number elements");
        final ByteBuffer b = allocateByteBuffer(data.length);
        b.put(data);
        return new Bytes(b, shape);
    }

    public static Tensor fromBlobUnsigned(ByteBuffer data, long[] shape) {
        check(data.capacity() == numel(shape), "Inconsistent data capacity:" + data.capacity()
                + " and shape number elements:" + numel(shape));
        check(data.isDirect(), "Data buffer must be direct (java.nio.ByteBuffer#allocateDirect)");
        check(data.order() == ByteOrder.nativeOrder(), "Data buffer must have native byte order");
        return new Bytes(data, shape);
    }

    public long numel() {
        return numel(shape);
    }

    public long[] shape() {
        return shape.clone();
    }

    public float[] getDataAsFloatArray() {
        throw new IllegalStateException("Tensor of type " + getClass().getSimpleName() + " cannot return data as float array.");
    }

    public byte[] getDataAsUnsignedByteArray() {
        throw new IllegalStateException("Tensor of type " + getClass().getSimpleName()
                + " cannot return data as unsigned byte array.");
    }

    static final class Floats extends Tensor {
        private final FloatBuffer data;

        Floats(FloatBuffer data, long[] shape) {
            super(shape);
            this.data = data;
        }

        @Override
        public float[] getDataAsFloatArray() {
            final float[] out = new float[data.capacity()];
            for (int i = 0; i < out.length; i++) {
                out[i] = data.get(i);
            }
            return out;
        }
    }

    static final class Bytes extends Tensor {
        private final ByteBuffer data;

        Bytes(ByteBuffer data, long[] shape) {
            super(shape);
            this.data = data;
        }

        @Override
        public byte[] getDataAsUnsignedByteArray() {
            final byte[] out = new byte[data.capacity()];
            for (int i = 0; i < out.length; i++) {
                out[i] = data.get(i);
            }
            return out;
        }
    }
}
