package org.gradle.wrapper;

import java.io.File;
import java.io.FileOutputStream;
import java.nio.file.Files;
import java.util.Arrays;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;

/**
 * Test substitute for Gradle's wrapper jar (there is no Gradle or Android SDK on the test machine).
 * It is started by the generated gradlew exactly like the real jar, checks what the real build would
 * need from its caller (the assembleDebug task, ANDROID_HOME pointing at a directory, the project as
 * working directory) and writes app/build/outputs/apk/debug/app-debug.apk as a zip of the manifest
 * and assets. FAKE_GRADLE_FAIL makes it fail like Gradle without an SDK.
 */
public final class GradleWrapperMain {
    public static void main(String[] args) throws Exception {
        System.out.println("fake gradle: " + Arrays.toString(args));
        if (System.getenv("FAKE_GRADLE_FAIL") != null) {
            System.out.println("SDK location not found. Define a valid SDK location with an ANDROID_HOME environment variable.");
            System.out.println("BUILD FAILED");
            System.exit(1);
        }
        if (!Arrays.asList(args).contains("assembleDebug")) {
            System.out.println("expected the assembleDebug task");
            System.exit(2);
        }
        String sdk = System.getenv("ANDROID_HOME");
        if (sdk == null || !new File(sdk).isDirectory()) {
            System.out.println("ANDROID_HOME is not a directory: " + sdk);
            System.exit(3);
        }
        File project = new File(System.getProperty("user.dir"));
        File manifest = new File(project, "app/src/main/AndroidManifest.xml");
        File assets = new File(project, "app/src/main/assets");
        File apk = new File(project, "app/build/outputs/apk/debug/app-debug.apk");
        apk.getParentFile().mkdirs();
        try (ZipOutputStream zip = new ZipOutputStream(new FileOutputStream(apk))) {
            zip.putNextEntry(new ZipEntry("AndroidManifest.xml"));
            zip.write(mergedManifest(project, manifest).getBytes(java.nio.charset.StandardCharsets.UTF_8));
            String[] names = assets.list();
            Arrays.sort(names);
            for (String name : names) {
                zip.putNextEntry(new ZipEntry("assets/" + name));
                zip.write(Files.readAllBytes(new File(assets, name).toPath()));
            }
        }
        System.out.println("BUILD SUCCESSFUL");
    }

    /** Like AGP 8's manifest merger: the module's `namespace` becomes the manifest's package attribute. */
    private static String mergedManifest(File project, File manifest) throws Exception {
        String text = new String(Files.readAllBytes(manifest.toPath()), java.nio.charset.StandardCharsets.UTF_8);
        if (text.contains("package=\"")) {
            return text;
        }
        String gradle = new String(Files.readAllBytes(new File(project, "app/build.gradle").toPath()),
                java.nio.charset.StandardCharsets.UTF_8);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("namespace\\s*=?\\s*[\"']([^\"']+)[\"']")
                .matcher(gradle);
        return m.find() ? text.replaceFirst("<manifest", "<manifest package=\"" + m.group(1) + "\"") : text;
    }
}
