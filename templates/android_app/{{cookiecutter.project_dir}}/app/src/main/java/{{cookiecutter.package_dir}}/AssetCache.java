package {{ cookiecutter.application_id }};

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * Copies assets (the models) to the app's files directory once: {@code Module.load} needs a file path. A copy
 * is reused while its stamp (the APK's modification time) matches, so it is made again only after an update.
 * Plain Java (no Context), so the tests run it on the JVM.
 */
final class AssetCache {
    /** Opens an asset by name (on Android: {@code getAssets()::open}). */
    interface Opener {
        InputStream open(String name) throws IOException;
    }

    private final File dir;
    private final String stamp;
    private final Opener opener;

    AssetCache(File dir, String stamp, Opener opener) {
        this.dir = dir;
        this.stamp = stamp;
        this.opener = opener;
    }

    /** The absolute path of {@code name}'s copy, copying it first when there is no current copy. */
    String path(String name) throws IOException {
        final File file = new File(dir, name);
        final File stampFile = new File(dir, name + ".stamp");
        if (file.isFile() && stampFile.isFile()
                && stamp.equals(new String(readAll(new FileInputStream(stampFile)), StandardCharsets.UTF_8))) {
            return file.getAbsolutePath();
        }
        final File tmp = new File(dir, name + ".partial");
        try (InputStream in = opener.open(name); OutputStream out = new FileOutputStream(tmp)) {
            copy(in, out);
        }
        if (!tmp.renameTo(file)) {
            throw new IOException("could not move " + tmp + " to " + file);
        }
        try (OutputStream out = new FileOutputStream(stampFile)) {
            out.write(stamp.getBytes(StandardCharsets.UTF_8));
        }
        return file.getAbsolutePath();
    }

    /** The whole asset in memory (labels, lookup table). */
    byte[] read(String name) throws IOException {
        return readAll(opener.open(name));
    }

    static byte[] readAll(InputStream stream) throws IOException {
        try (InputStream in = stream) {
            final ByteArrayOutputStream out = new ByteArrayOutputStream();
            copy(in, out);
            return out.toByteArray();
        }
    }

    private static void copy(InputStream in, OutputStream out) throws IOException {
        final byte[] buffer = new byte[64 * 1024];
        int n;
        while ((n = in.read(buffer)) > 0) {
            out.write(buffer, 0, n);
        }
    }
}
