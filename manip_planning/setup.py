from setuptools import find_packages, setup

package_name = 'manip_planning'

setup(
    name=package_name,
    version='0.1.0',
    # The package directory itself is listed explicitly so that it is installed even before it has
    # an __init__.py; find_packages adds any subpackages.
    packages=sorted({package_name, *find_packages(exclude=['test', 'test.*'])}),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='manip maintainers',
    maintainer_email='maintainers@manip-robotics.org',
    description='Motion planning for the manip stack: joint and Cartesian trajectories, collision-aware paths.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'planner = manip_planning:planner_main',
            'pick_place = manip_planning:pick_place_main',
            'manip-plan-bench = manip_planning.plan_bench:main',
        ],
    },
)
