package dev.shuffled.client;

/**
 * One application on the daemon, as {@link ShuffledClient#listApplications()} returns it.
 *
 * @param appId the application id
 * @param ownerUid the uid that registered it, or -1 when the daemon has no owner recorded (outputs
 *     in its root from before the registry file named them)
 * @param connections connections registered for it now
 * @param shuffles shuffles with files, in the daemon's root and its registered Spark local dirs
 * @param mapOutputs committed map outputs (index files)
 * @param bytes bytes of all its files
 */
public record ApplicationInfo(
    String appId, long ownerUid, int connections, int shuffles, long mapOutputs, long bytes) {}
