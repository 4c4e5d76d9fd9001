# Installed by the slurm-app bundle (roles/open_ondemand). What one interactive session may ask
# of the cluster, read from Slurm as the signed-in user each time the dashboard draws an app's
# form (form.yml.erb) or submits it (submit.yml.erb): a node that joins with more CPUs or a new
# GPU type is offered at once, without a deploy of the portal, and a request past a partition's
# limit is refused before sbatch with the limit named.
#
# One `sinfo -N` (a row per node and partition): the partition (`*` marks the default), its
# time limit, the node's CPUs, memory (MiB) and generic resources. Only the administrator
# writes these (slurm.conf, the nodes' gres.conf): nothing a user submits is in a row.
require "open3"

module SlurmAppSessionLimits
  # What the largest node of a partition has, and the partition's time limit (nil: none).
  # gpus: the most GPUs one node has, by type ("" for any type).
  Partition = Struct.new(:name, :default, :max_minutes, :cpus, :memory_mib, :gpus, keyword_init: true)

  SINFO = ["sinfo", "-h", "-N", "-o", "%P|%l|%c|%m|%G"].freeze
  GPU = /(?:\A|,)gpu(?::([^:(,]+))?:(\d+)/

  # The partitions by name; empty where Slurm does not answer (the form then offers no limits
  # and Slurm's own checks at submit remain).
  def self.partitions(argv = SINFO)
    output, status = Open3.capture2(*argv, err: File::NULL)
    status.success? ? parse(output) : {}
  rescue SystemCallError
    {}
  end

  def self.parse(text)
    text.each_line.with_object({}) do |line, found|
      name, limit, cpus, memory, gres = line.chomp.split("|", 5)
      next if gres.nil? || name.to_s.empty?

      default = name.end_with?("*")
      name = name.delete_suffix("*")
      partition = found[name] ||= Partition.new(
        name: name, default: default, max_minutes: minutes(limit), cpus: 0, memory_mib: 0, gpus: {}
      )
      partition.cpus = [partition.cpus, cpus.to_i].max
      partition.memory_mib = [partition.memory_mib, memory.to_i].max
      node_gpus = gres.scan(GPU).map { |type, count| [type.to_s, count.to_i] }
      node_gpus << ["", node_gpus.sum { |_, count| count }] unless node_gpus.empty?
      node_gpus.each do |type, count|
        partition.gpus[type] = [partition.gpus.fetch(type, 0), count].max
      end
    end
  end

  # sinfo's %l, as Slurm prints a time: "D-HH:MM:SS", "H:MM:SS", "M:SS"; nil for "infinite"
  # (or anything else).
  def self.minutes(limit)
    match = /\A(?:(\d+)-)?(\d+(?::\d+){0,2})\z/.match(limit.to_s)
    return nil if match.nil?

    parts = match[2].split(":").map(&:to_i)
    hours, minutes = if match[1] then parts.fill(0, parts.size...3).first(2)
                     elsif parts.size == 3 then parts.first(2)
                     else [0, parts.first]
                     end
    (match[1].to_i * 24 + hours) * 60 + minutes
  end

  # What the form offers across the partitions: the most of each a session could get anywhere.
  def self.most(partitions)
    values = partitions.values
    {
      hours: values.all?(&:max_minutes) && !values.empty? ? values.map(&:max_minutes).max / 60 : nil,
      cpus: values.map(&:cpus).max || 0,
      memory_mib: values.map(&:memory_mib).max || 0,
      gpus: values.map { |p| p.gpus.fetch("", 0) }.max || 0,
      gpu_types: values.flat_map { |p| p.gpus.keys }.reject(&:empty?).uniq.sort
    }
  end

  # Why the session the form describes cannot run, naming the field and the limit; nil when it
  # fits, or its partition is not known here (Slurm then decides). Values are the form's
  # strings, as a browser posts them.
  def self.refusal(partitions, queue:, hours:, cpus:, memory_mib:, gpu_type:, gpus:)
    counts = { "Hours" => hours, "CPUs per node" => cpus, "Memory per node (MiB)" => memory_mib,
               "GPUs per node" => gpus }
    counts.each do |label, value|
      return "#{label}: #{value.to_s.inspect} is not a whole number" unless value.to_s.match?(/\A\d+\z/)
    end
    type = gpu_type.to_s
    return "GPU type: #{type.inspect} is not a type Slurm names" unless type.match?(/\A[\w.-]*\z/)

    hours, cpus, memory_mib, gpus = counts.values.map(&:to_i)
    return "Hours: at least 1" if hours < 1
    return "CPUs per node: at least 1" if cpus < 1

    partition = partitions[queue.to_s] || (queue.to_s.empty? && partitions.values.find(&:default))
    return nil unless partition

    where = "partition #{partition.name}"
    if partition.max_minutes && hours * 60 > partition.max_minutes
      return "Hours: #{hours} is over #{where}'s time limit of #{partition.max_minutes / 60} hours"
    end
    if cpus > partition.cpus
      return "CPUs per node: #{cpus} is more than any node of #{where} has (#{partition.cpus})"
    end
    if memory_mib > partition.memory_mib
      return "Memory per node (MiB): #{memory_mib} is more than any node of #{where} has " \
             "(#{partition.memory_mib})"
    end
    if gpus.positive? && !partition.gpus.key?(type)
      return "GPU type: no node of #{where} has #{type.empty? ? 'GPUs' : "#{type} GPUs"}"
    end
    most = partition.gpus.fetch(type, 0)
    if gpus > most
      return "GPUs per node: #{gpus} is more than any node of #{where} has " \
             "(#{most}#{type.empty? ? '' : " #{type}"})"
    end
    nil
  end
end
